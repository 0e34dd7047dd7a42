import { type RawBuilder, sql } from 'kysely';
import { z } from 'zod';
import { type DB, PREPARED } from '../../db/database.js';
import { purgeInBatches, type PurgeOptions } from '../../db/purge.js';
import type { Queryable, Trx } from '../../db/transaction.js';
import { parseInput } from '../kernel/index.js';

/**
 * Program insights (issue 20): the ledger's movements over time, read from `insight_buckets`,
 * which the statement writing each ledger entry keeps (migration 2026_11_25_013). A series never
 * scans the ledger: it sums at most a few rows per 15-minute bucket, and a day series (and the
 * balance before any range) one row per past day that compaction folded (insight_days).
 *
 * A day is a day of the zone the shop had then (migration 2026_11_27_018): active members are
 * counted per local day as entries are written, and could not be re-read in another zone's days,
 * so a change of zone starts new days and leaves those before it as they were (shop_timezones).
 */
export const INSIGHT_INTERVALS = ['hour', 'day'] as const;
export type InsightInterval = (typeof INSIGHT_INTERVALS)[number];

/** Points of a series at most: a year of days, a month of hours. */
export const MAX_INTERVALS: Record<InsightInterval, number> = { day: 366, hour: 744 };

/** Points moved in one interval (the shop's local hour or day starting at `at`), and the balance owed after it. */
export type PointsInsight = {
  at: Date;
  /** The local date the interval starts on (YYYY-MM-DD), in the zone whose day it is. */
  date: string;
  issued: { orders: number; rules: number; manual: number; referrals: number; total: number };
  /** Taken by manual subtractions and lower sets (API, imports). */
  removedManually: number;
  redeemed: number;
  expired: number;
  clawedBack: number;
  /** Points in customers' balances at the end of the interval: the program's liability. */
  outstanding: number;
  /** Points held as pending at the end of the interval (orders' points waiting for pendingDays). */
  pending: number;
  /**
   * Customers with a ledger entry other than an expiry, or an order's pending points, that local
   * day (days only: null in an hourly series).
   */
  activeMembers: number | null;
  /** Customers who joined in the interval (less those deleted since), and all members at its end. */
  newMembers: number;
  members: number;
  /** Discount codes of every reward issued and ended in the interval: read when first asked (see RewardInsight.intervals). */
  codes(): Promise<CodeCounts>;
};

/**
 * Discount codes over an interval or the range: those issued in it, and those whose life ended in
 * it, each at the instant of its end (used at its order's time, expired at its expiresAt,
 * cancelled when the shop cancelled it). So a code issued before the range can end in it.
 */
export type CodeCounts = { issued: number; used: number; expired: number; cancelled: number; useRate: number | null };

/** One reward's codes in one interval (the shop's local hour or day starting at `at`) in which it had any. */
export type RewardInterval = CodeCounts & { at: Date; date: string };

/**
 * Redemptions of one reward in the range: `codes` issued (and `points` they cost; `discount` a
 * decimal string in the reward's unit: money, percent, shipping), how many ended and how, and the
 * same per interval.
 */
export type RewardInsight = {
  rewardId: string;
  name: string | null;
  type: string | null;
  codes: number;
  points: number;
  discount: string;
  used: number;
  expired: number;
  cancelled: number;
  useRate: number | null;
  /**
   * The intervals in which the reward had codes issued or ended. Read when first asked, for every
   * reward at once: a pass over each reward's buckets that places each in its local interval costs
   * a few times the range's totals, which most readers (the program page) do not need.
   */
  intervals(): Promise<RewardInterval[]>;
};

/**
 * The redemption-to-use rate: codes used ÷ codes issued, rounded half up to 4 decimals, from the
 * two exact counts in integer arithmetic; null when none was issued. Both are counted over the same
 * range, so it can pass 1 when codes issued before the range are used in it.
 */
function useRate(used: number, issued: number): number | null {
  if (issued === 0) return null;
  return Number((BigInt(used) * 20_000n + BigInt(issued)) / (2n * BigInt(issued))) / 10_000;
}

export type TierCount = { tierId: string; name: string; members: number };

export type PointsInsights = { interval: InsightInterval; timezone: string; points: PointsInsight[]; rewards: RewardInsight[]; tiers: TierCount[] };

/**
 * A rollup: movements by shop, 15-minute bucket (and `keys`) and stripe, and the local days
 * compaction folded them into (`days`, keyed by the day's start instead of the bucket).
 */
type Rollup = { table: 'insight_buckets' | 'insight_rewards'; days: 'insight_days' | 'insight_reward_days'; keys: readonly string[]; columns: readonly string[] };
const LEDGER: Rollup = {
  table: 'insight_buckets',
  days: 'insight_days',
  keys: [],
  columns: ['issued_orders', 'issued_rules', 'issued_manual', 'issued_referrals', 'removed_manual', 'redeemed', 'expired', 'clawed_back', 'pending', 'active_members', 'members'],
};
const REWARDS: Rollup = { table: 'insight_rewards', days: 'insight_reward_days', keys: ['reward_id'], columns: ['codes', 'points', 'discount', 'used', 'expired', 'cancelled'] };

/**
 * A rollup's rows of [from, to), each with the start of its interval (`at`). In a day series a
 * folded day's row stands for its buckets, beside the rows still striped; the day holding `to`,
 * which the range may end inside of, is read by its buckets. `from` starts an interval.
 */
function rollupRows(r: Rollup, shopId: string, periods: Period[], interval: InsightInterval, from: RawBuilder<unknown>, to: Date) {
  const columns = sql.join([...r.keys, ...r.columns].map((c) => sql.ref(c)));
  const buckets = (where: RawBuilder<unknown>) =>
    sql`select ${intervalStart(periods, interval, sql`bucket`)} as at, ${columns} from ${sql.table(r.table)} where shop_id = ${shopId} and ${where}`;
  if (interval === 'hour') return buckets(sql`bucket >= ${from} and bucket < ${to}`);
  const last = sql`insight_day_start(${shopId}, ${to}::timestamptz)`;
  return sql`select day as at, ${columns} from ${sql.table(r.days)} where shop_id = ${shopId} and day >= ${from} and day < ${last}
    union all ${buckets(sql`stripe >= 0 and bucket >= ${from} and bucket < ${last}`)}
    union all ${buckets(sql`bucket >= ${last} and bucket < ${to}`)}`;
}

/** A rollup's rows before `start`: the folded days before the day holding it, the rows still striped, and that day's buckets. */
function rollupRowsBefore(r: Rollup, shopId: string, start: RawBuilder<unknown>) {
  const columns = sql.join([...r.keys, ...r.columns].map((c) => sql.ref(c)));
  const first = sql`insight_day_start(${shopId}, ${start})`;
  return sql`select ${columns} from ${sql.table(r.days)} where shop_id = ${shopId} and day < ${first}
    union all select ${columns} from ${sql.table(r.table)} where shop_id = ${shopId} and stripe >= 0 and bucket < ${first}
    union all select ${columns} from ${sql.table(r.table)} where shop_id = ${shopId} and bucket >= ${first} and bucket < ${start}`;
}

const insightsQuerySchema = z
  .object({ from: z.date(), to: z.date(), interval: z.enum(INSIGHT_INTERVALS) })
  .refine((q) => q.to > q.from, { message: 'must be after from', path: ['to'] })
  .refine((q) => (q.to.getTime() - q.from.getTime()) / (q.interval === 'day' ? 86_400_000 : 3_600_000) <= MAX_INTERVALS[q.interval], {
    message: `spans too many intervals: at most ${MAX_INTERVALS.day} days or ${MAX_INTERVALS.hour} hours`,
    path: ['to'],
  });

type Row = {
  at: Date;
  date: string;
  issued_orders: string;
  issued_rules: string;
  issued_manual: string;
  issued_referrals: string;
  removed_manual: string;
  redeemed: string;
  expired: string;
  clawed_back: string;
  outstanding: string;
  pending: string;
  active_members: string;
  new_members: string;
  members: string;
};

/**
 * The series of every local hour or day of the shop that starts in [from, to), the first one
 * rounded down to its start; an interval without movements is there with zeros. Days are the
 * shop's days as it had them (its periods of time zones); hours are hours of its zone now.
 */
export async function pointsInsights(db: Queryable, shopId: string, query: unknown): Promise<PointsInsights> {
  const { from, to, interval } = parseInput(insightsQuerySchema, query);
  const { timezone } = await db.selectFrom('shops').select('timezone').where('id', '=', shopId).executeTakeFirstOrThrow();
  const current: Period = { since: null, timezone, carriedFrom: null, carriedUntil: null };
  const periods = interval === 'day' ? await shopPeriods(db, shopId, current) : [current];
  const start = sql`(select at from first)`;
  // Days step in local time (a DST day has 23 or 25 hours); a local hour is always 60 minutes (a
  // clock set back repeats one), so hours step in absolute time.
  const starts =
    interval === 'day'
      ? dayStarts(periods, start, to)
      : sql`select s as at, to_char(s at time zone ${timezone}, 'YYYY-MM-DD') as date from generate_series(${start}, ${to}::timestamptz, interval '1 hour') s`;
  const net = sql`issued_orders + issued_rules + issued_manual + issued_referrals - removed_manual - redeemed - expired - clawed_back`;
  // Prepared (planning cost more than running it): one text per interval and number of the shop's
  // zone periods, so a handful per connection.
  const { rows } = await sql<Row>`${sql.raw(PREPARED)}
    with first as (select ${intervalStart(periods, interval, sql`${from}::timestamptz`)} as at),
    series as (select at, date from (${starts}) s where at < ${to}),
    moved as (
      select at,
        sum(issued_orders) as issued_orders, sum(issued_rules) as issued_rules, sum(issued_manual) as issued_manual,
        sum(issued_referrals) as issued_referrals, sum(removed_manual) as removed_manual, sum(redeemed) as redeemed,
        sum(expired) as expired, sum(clawed_back) as clawed_back, sum(${net}) as net, sum(pending) as pending,
        sum(active_members) as active_members, sum(members) as members
      from (${rollupRows(LEDGER, shopId, periods, interval, start, to)}) m
      group by 1
    ),
    before as (
      select coalesce(sum(${net}), 0) as net, coalesce(sum(pending), 0) as pending, coalesce(sum(members), 0) as members
      from (${rollupRowsBefore(LEDGER, shopId, start)}) b
    )
    select s.at, s.date,
      coalesce(m.issued_orders, 0) as issued_orders, coalesce(m.issued_rules, 0) as issued_rules,
      coalesce(m.issued_manual, 0) as issued_manual, coalesce(m.issued_referrals, 0) as issued_referrals,
      coalesce(m.removed_manual, 0) as removed_manual, coalesce(m.redeemed, 0) as redeemed,
      coalesce(m.expired, 0) as expired, coalesce(m.clawed_back, 0) as clawed_back,
      (select net from before) + sum(coalesce(m.net, 0)) over (order by s.at) as outstanding,
      (select pending from before) + sum(coalesce(m.pending, 0)) over (order by s.at) as pending,
      coalesce(m.active_members, 0) as active_members,
      coalesce(m.members, 0) as new_members,
      (select members from before) + sum(coalesce(m.members, 0)) over (order by s.at) as members
    from series s left join moved m on m.at = s.at
    order by s.at`.execute(db);
  const first = rows[0]?.at ?? from;
  const dates = new Map(rows.map((r) => [r.at.getTime(), r.date]));
  const perInterval = once(() => codeIntervals(db, shopId, periods, interval, dates, first, to));
  const [rewards, tiers] = await Promise.all([rewardInsights(db, shopId, periods, interval, perInterval, first, to), tierCounts(db, shopId)]);
  // Sums of bigints come back as strings; points stay far below 2^53.
  const n = Number;
  return {
    interval,
    timezone,
    points: rows.map((r) => {
      const issued = { orders: n(r.issued_orders), rules: n(r.issued_rules), manual: n(r.issued_manual), referrals: n(r.issued_referrals) };
      return {
        at: r.at,
        date: r.date,
        issued: { ...issued, total: issued.orders + issued.rules + issued.manual + issued.referrals },
        removedManually: n(r.removed_manual),
        redeemed: n(r.redeemed),
        expired: n(r.expired),
        clawedBack: n(r.clawed_back),
        outstanding: n(r.outstanding),
        pending: n(r.pending),
        activeMembers: interval === 'day' ? n(r.active_members) : null,
        newMembers: n(r.new_members),
        members: n(r.members),
        codes: async () => (await perInterval()).total.get(r.at.getTime()) ?? counts(0, 0, 0, 0),
      };
    }),
    rewards,
    tiers,
  };
}

/**
 * A period of a shop's time zones (shop_timezones): from `since` (null: always), the days are
 * those of `timezone`, once the day carried into it (from `carriedFrom`) ends at `carriedUntil`.
 */
type Period = { since: Date | null; timezone: string; carriedFrom: Date | null; carriedUntil: Date | null };

/** The shop's periods, oldest first; `current` alone for a shop that never changed zone. */
async function shopPeriods(db: Queryable, shopId: string, current: Period): Promise<Period[]> {
  const rows = await db
    .selectFrom('shop_timezones')
    .select([sql<Date | null>`nullif(since, '-infinity')`.as('since'), 'timezone', 'carried_from', 'carried_until'])
    .where('shop_id', '=', shopId)
    .orderBy('shop_timezones.since')
    .execute();
  return rows.length ? rows.map((r) => ({ since: r.since, timezone: r.timezone, carriedFrom: r.carried_from, carriedUntil: r.carried_until })) : [current];
}

/**
 * The start of the local day (or hour) that holds the instant `at`, as an expression: in `at`'s
 * period, the start of the day carried into it while that lasts, else its zone's local start.
 */
function intervalStart(periods: Period[], unit: InsightInterval, at: RawBuilder<unknown>) {
  const local = (p: Period) => {
    const start = sql`date_trunc(${sql.lit(unit)}, ${at} at time zone ${p.timezone}) at time zone ${p.timezone}`;
    return p.carriedUntil ? sql`case when ${at} < ${p.carriedUntil}::timestamptz then ${p.carriedFrom}::timestamptz else ${start} end` : start;
  };
  const later = periods.slice(1).map((p, i) => sql`when ${at} < ${p.since}::timestamptz then ${local(periods[i]!)}`);
  return later.length ? sql`case ${sql.join(later, sql` `)} else ${local(periods.at(-1)!)} end` : local(periods[0]!);
}

/**
 * The starts (and local dates) of the shop's days from `start` (that of the one holding
 * `from`) up to `to`: each period gives its zone's midnights, once its carried day has ended.
 */
function dayStarts(periods: Period[], start: RawBuilder<unknown>, to: Date) {
  const each = periods.map((p, i) => {
    const lo = sql`greatest(${p.carriedUntil}::timestamptz, ${start})`;
    const hi = sql`least(${periods[i + 1]?.since ?? null}::timestamptz, ${to}::timestamptz)`;
    return sql`select s at time zone ${p.timezone} as at, to_char(s, 'YYYY-MM-DD') as date
      from generate_series(date_trunc('day', ${lo} at time zone ${p.timezone}), ${hi} at time zone ${p.timezone}, interval '1 day') s
      where s at time zone ${p.timezone} >= ${lo} and s at time zone ${p.timezone} < ${hi}`;
  });
  return sql.join(each, sql` union all `);
}

/**
 * Starts a period of the shop's time zones (in the transaction that changes the zone, before it
 * does): the day in progress goes on until the new zone's first midnight of a later date, so it is
 * neither cut short nor followed by its own date again. Nothing counted is moved: a few rows,
 * whatever the shop holds. A shop with nothing counted yet has no days to keep, and takes its zone
 * for all time.
 *
 * The shop's row is locked FOR UPDATE, which waits for the writes in flight (each ledger or pending
 * insert holds FOR KEY SHARE on it, by its foreign key) and holds new ones until the change commits;
 * the period starts at the database's clock once the lock is held (or at `now`, when later). So an
 * entry whose statement read the old zone was stamped before the change, and every later one reads
 * the new zone: the days are exact under concurrent writes.
 */
export async function startTimezonePeriod(trx: Trx, shopId: string, timezone: string, now: Date): Promise<void> {
  const shop = await trx.selectFrom('shops').select('timezone').where('id', '=', shopId).forUpdate().executeTakeFirst();
  if (!shop || shop.timezone === timezone) return;
  const counted = await trx.selectFrom('insight_buckets').select('bucket').where('shop_id', '=', shopId).limit(1).executeTakeFirst();
  // A zone the database does not know (stored before settings checked it) cannot place a day; the
  // new zone then takes over all of time, as for a shop with nothing counted yet.
  const { rows: known } = await sql`select 1 from pg_timezone_names where name = ${shop.timezone}`.execute(trx);
  if (!counted || known.length === 0) {
    await trx.deleteFrom('shop_timezones').where('shop_id', '=', shopId).execute();
    await trx.updateTable('shops').set({ timezone_days_from: null }).where('id', '=', shopId).execute();
    // The folded days become the new zone's (none when nothing was counted).
    for (const r of [LEDGER, REWARDS]) {
      const columns = sql.join([...r.keys, ...r.columns].map((c) => sql.ref(c)));
      await sql`delete from ${sql.table(r.days)} where shop_id = ${shopId}`.execute(trx);
      await sql`
        insert into ${sql.table(r.days)} (shop_id, day, ${columns})
        select shop_id, date_trunc('day', bucket at time zone ${timezone}) at time zone ${timezone}, ${sql.join([...r.keys.map((k) => sql.ref(k)), ...r.columns.map((c) => sql`sum(${sql.ref(c)})`)])}
        from ${sql.table(r.table)} where shop_id = ${shopId} and stripe = -1
        group by ${sql.join(['1', '2', ...r.keys].map((k) => sql.raw(k)))}`.execute(trx);
    }
    return;
  }
  await sql`
    with shop as (select timezone, timezone_days_from from shops where id = ${shopId}),
    last as (select since, carried_day, carried_from from shop_timezones where shop_id = ${shopId} order by since desc limit 1),
    at as (select greatest(${now}::timestamptz, clock_timestamp(), (select since + interval '1 millisecond' from last)) as t),
    -- The day in progress: the carried one while it lasts, else a day of the zone the shop has now.
    day as (
      select t,
        case when s.timezone_days_from is null or t >= s.timezone_days_from then (t at time zone s.timezone)::date else l.carried_day end as day,
        case when s.timezone_days_from is null or t >= s.timezone_days_from then date_trunc('day', t at time zone s.timezone) at time zone s.timezone else l.carried_from end as day_from
      from at cross join shop s left join last l on true
    ),
    initial as (
      insert into shop_timezones (shop_id, since, timezone)
      select ${shopId}, '-infinity', timezone from shop where not exists (select from last)
    ),
    period as (
      insert into shop_timezones (shop_id, since, timezone, carried_day, carried_from, carried_until)
      select ${shopId}, t, ${timezone}, day, day_from, (greatest((t at time zone ${timezone})::date, day) + 1)::timestamp at time zone ${timezone}
      from day
      returning carried_until
    )
    update shops set timezone_days_from = (select carried_until from period) where id = ${shopId}`.execute(trx);
}

const counts = (issued: number, used: number, expired: number, cancelled: number): CodeCounts => ({ issued, used, expired, cancelled, useRate: useRate(used, issued) });

/** `read`, run once when first called: a figure read only if a reader asks for it. */
function once<T>(read: () => Promise<T>): () => Promise<T> {
  let result: Promise<T> | undefined;
  return () => (result ??= read());
}

/** Codes per interval: each reward's intervals with any, and every reward's together, by the interval's start. */
type CodeIntervals = { byReward: Map<string, RewardInterval[]>; total: Map<number, CodeCounts> };

/**
 * Redemptions in [from, to) by reward, most redeemed first; a deleted reward keeps its figures,
 * without a name. Each reward's intervals come from `perInterval`, when asked.
 */
async function rewardInsights(
  db: Queryable,
  shopId: string,
  periods: Period[],
  interval: InsightInterval,
  perInterval: () => Promise<CodeIntervals>,
  from: Date,
  to: Date,
): Promise<RewardInsight[]> {
  const { rows } = await sql<{ reward_id: string; name: string | null; type: string | null; codes: string; points: string; discount: string; used: string; expired: string; cancelled: string }>`${sql.raw(PREPARED)}
    select i.reward_id, r.name, r.type, sum(i.codes) as codes, sum(i.points) as points, sum(i.discount)::text as discount,
      sum(i.used) as used, sum(i.expired) as expired, sum(i.cancelled) as cancelled
    from (${rollupRows(REWARDS, shopId, periods, interval, sql`${from}::timestamptz`, to)}) i left join points_redemptions r on r.id = i.reward_id
    group by i.reward_id, r.name, r.type
    order by sum(i.codes) desc, i.reward_id`.execute(db);
  const n = Number;
  return rows.map((r) => {
    const { issued: codes, ...ended } = counts(n(r.codes), n(r.used), n(r.expired), n(r.cancelled));
    const intervals = async () => (await perInterval()).byReward.get(r.reward_id) ?? [];
    return { rewardId: r.reward_id, name: r.name, type: r.type, codes, points: n(r.points), discount: r.discount, ...ended, intervals };
  });
}

/** Codes issued and ended per reward and interval of the series (`dates`: its local dates by start) in [from, to). */
async function codeIntervals(
  db: Queryable,
  shopId: string,
  periods: Period[],
  interval: InsightInterval,
  dates: Map<number, string>,
  from: Date,
  to: Date,
): Promise<CodeIntervals> {
  const { rows } = await sql<{ reward_id: string; at: Date; codes: string; used: string; expired: string; cancelled: string }>`${sql.raw(PREPARED)}
    select reward_id, at, sum(codes) as codes, sum(used) as used, sum(expired) as expired, sum(cancelled) as cancelled
    from (${rollupRows(REWARDS, shopId, periods, interval, sql`${from}::timestamptz`, to)}) i
    group by 1, 2
    having sum(codes) + sum(used) + sum(expired) + sum(cancelled) > 0
    order by 1, 2`.execute(db);
  const byReward = new Map<string, RewardInterval[]>();
  const sums = new Map<number, [number, number, number, number]>();
  for (const r of rows) {
    const [issued, used, expired, cancelled] = [Number(r.codes), Number(r.used), Number(r.expired), Number(r.cancelled)];
    const list = byReward.get(r.reward_id) ?? [];
    byReward.set(r.reward_id, list);
    list.push({ at: r.at, date: dates.get(r.at.getTime())!, ...counts(issued, used, expired, cancelled) });
    const s = sums.get(r.at.getTime()) ?? [0, 0, 0, 0];
    sums.set(r.at.getTime(), [s[0] + issued, s[1] + used, s[2] + expired, s[3] + cancelled]);
  }
  return { byReward, total: new Map([...sums].map(([at, s]) => [at, counts(...s)])) };
}

/** Members per tier now, lowest tier first (read live: a count per tier on tier_members' tier index). */
async function tierCounts(db: Queryable, shopId: string): Promise<TierCount[]> {
  const { rows } = await sql<{ id: string; name: string; members: string }>`
    select t.id, t.name, (select count(*) from tier_members m where m.tier_id = t.id) as members
    from tiers t where t.shop_id = ${shopId}
    order by t.threshold`.execute(db);
  return rows.map((r) => ({ tierId: r.id, name: r.name, members: Number(r.members) }));
}

/**
 * Folds the stripes of every bucket that ended before `before` into one row (stripe -1), in
 * batches, so an hourly series reads one row per past bucket however many connections wrote it;
 * and adds them to the shop's local days, which day series and the balance before a range read
 * instead of their buckets. Exact under live writes and concurrent runs: the striped rows are
 * deleted and their sums added in one statement (a second run finds them deleted), and a late
 * write to a folded bucket makes a new striped row, folded by a later run. In the retention loop
 * (hourly); resolves to the striped rows folded.
 */
export async function compactInsights(db: DB, before: Date, options: PurgeOptions = {}): Promise<number> {
  // A shop whose zone PostgreSQL no longer knows (a tzdata upgrade can drop one) cannot place its
  // buckets in days: its rows stay striped, still read exactly, rather than fail every shop's batch.
  const { rows: unplaceable } = await sql<{ id: string }>`
    select id from shops where timezone not in (select name from pg_timezone_names)
    union select shop_id from shop_timezones where timezone not in (select name from pg_timezone_names)`.execute(db);
  const skipped = unplaceable.length ? sql`and shop_id not in (${sql.join(unplaceable.map((r) => r.id))})` : sql``;
  let folded = 0;
  for (const r of [LEDGER, REWARDS]) {
    folded += await purgeInBatches<true>(options, async (_position, limit) => {
      const keys = ['shop_id', 'bucket', ...r.keys];
      const list = sql.join(keys.map((k) => sql.ref(k)));
      const columns = sql.join(r.columns.map((c) => sql.ref(c)));
      const sums = sql.join(r.columns.map((c) => sql`sum(${sql.ref(c)}) as ${sql.ref(c)}`));
      const add = (alias: string) => sql.join(r.columns.map((c) => sql`${sql.ref(c)} = ${sql.ref(`${alias}.${c}`)} + excluded.${sql.ref(c)}`));
      const dayKeys = sql.join(['shop_id', 'day', ...r.keys].map((k) => sql.ref(k)));
      const { rows } = await sql<{ n: string }>`
        with striped as (
          select ${list} from ${sql.table(r.table)} where stripe >= 0 and bucket < ${before} ${skipped} order by bucket, shop_id limit ${limit}
        ), gone as (
          delete from ${sql.table(r.table)} t using (select distinct * from striped) k
          where ${sql.join(keys.map((k) => sql`t.${sql.ref(k)} = k.${sql.ref(k)}`), sql` and `)} and t.stripe >= 0
          returning t.*
        ), buckets as (
          select ${list}, ${sums} from gone group by ${list}
        ), folded as (
          insert into ${sql.table(r.table)} as f (${list}, stripe, ${columns})
          select ${list}, -1, ${columns} from buckets
          on conflict (${list}, stripe) do update set ${add('f')}
        ), days as (
          -- Rows in key order, as the writers of days take them.
          insert into ${sql.table(r.days)} as d (${dayKeys}, ${columns})
          select * from (select shop_id, insight_day_start(shop_id, bucket) as day, ${sql.join([...r.keys.map((k) => sql.ref(k)), sums])} from buckets group by ${dayKeys}) g
          order by ${dayKeys}
          on conflict (${dayKeys}) do update set ${add('d')}
        )
        select count(*) as n from gone`.execute(db);
      const n = Number(rows[0]!.n);
      return { deleted: n, next: n > 0 ? true : null };
    });
  }
  return folded;
}

/**
 * Deletes the active-member markers of days before `before`'s UTC date: at least two local days
 * past in any time zone, so no entry can mark them again; but a day carried over a change of time
 * zone can last longer (it goes on until the new zone's next midnight), so its markers stay until
 * it ended before `before`. In the retention loop.
 */
export async function purgeActiveMemberMarkers(db: DB, before: Date, options: PurgeOptions = {}): Promise<number> {
  return purgeInBatches<true>(options, async (_position, limit) => {
    const { rows } = await sql<{ n: string }>`
      with gone as (
        delete from insight_active_days where (day, shop_id, customer_id) in (
          select day, shop_id, customer_id from insight_active_days m where day < ${before.toISOString().slice(0, 10)}::date
            and not exists (select from shop_timezones p where p.shop_id = m.shop_id and p.carried_day = m.day and p.carried_until > ${before})
          order by day, shop_id, customer_id limit ${limit})
        returning 1)
      select count(*) as n from gone`.execute(db);
    const n = Number(rows[0]!.n);
    return { deleted: n, next: n < limit ? null : true };
  });
}
