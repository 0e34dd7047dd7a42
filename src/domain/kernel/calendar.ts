/** A shop's calendar: its days and weeks in its time zone, as plain date arithmetic. */

/** The day and ISO week of `at` in the shop's time zone: '2026-11-24', '2026-W48'. */
export function shopPeriods(at: Date, timeZone: string): { day: string; week: string; year: string } {
  const day = new Intl.DateTimeFormat('en-CA', { timeZone, year: 'numeric', month: '2-digit', day: '2-digit' }).format(at);
  const [y, m, d] = day.split('-').map(Number) as [number, number, number];
  // ISO 8601: a week runs Monday to Sunday and belongs to the year of its Thursday; week 1 holds 4 January.
  const weekday = (new Date(Date.UTC(y, m - 1, d)).getUTCDay() + 6) % 7;
  const thursday = new Date(Date.UTC(y, m - 1, d + 3 - weekday));
  const jan4 = new Date(Date.UTC(thursday.getUTCFullYear(), 0, 4));
  const week = 1 + Math.round(((thursday.getTime() - jan4.getTime()) / 86_400_000 - 3 + ((jan4.getUTCDay() + 6) % 7)) / 7);
  return { day, week: `${thursday.getUTCFullYear()}-W${String(week).padStart(2, '0')}`, year: String(y) };
}

/** The instant the shop-local day `day` ('YYYY-MM-DD') begins in `timeZone` (its first instant, should midnight not exist). */
export function startOfShopDay(day: string, timeZone: string): Date {
  const [y, m, d] = day.split('-').map(Number) as [number, number, number];
  const midnightUtc = Date.UTC(y, m - 1, d);
  // The zone's offset at an instant: its wall clock there, read as UTC, minus the instant.
  const offset = (at: number) => {
    const parts = Object.fromEntries(
      new Intl.DateTimeFormat('en-US', { timeZone, hourCycle: 'h23', year: 'numeric', month: 'numeric', day: 'numeric', hour: 'numeric', minute: 'numeric', second: 'numeric' })
        .formatToParts(at)
        .map((p) => [p.type, Number(p.value)]),
    );
    return Date.UTC(parts.year!, parts.month! - 1, parts.day!, parts.hour!, parts.minute!, parts.second!) - at;
  };
  // Twice: the offset at the first guess may be the other side of a DST change.
  let start = midnightUtc - offset(midnightUtc);
  start = midnightUtc - offset(start);
  // Where midnight does not exist (a DST jump at 00:00), the guess lands on the day before: its first hour then.
  while (shopPeriods(new Date(start), timeZone).day < day) start += 3_600_000;
  return new Date(start);
}

/** The day after `day` ('YYYY-MM-DD'). */
export function nextDay(day: string): string {
  const [y, m, d] = day.split('-').map(Number) as [number, number, number];
  return new Date(Date.UTC(y, m - 1, d + 1)).toISOString().slice(0, 10);
}
