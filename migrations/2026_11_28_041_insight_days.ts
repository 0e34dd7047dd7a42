// Frozen in time: a migration never imports from src/, so later code changes cannot rewrite history.
import { type Kysely, sql } from 'kysely';

/** Each rollup, the table of its days, the keys beside shop and bucket, and its sums. */
const ROLLUPS = [
  {
    table: 'insight_buckets',
    days: 'insight_days',
    keys: [] as string[],
    columns: ['issued_orders', 'issued_rules', 'issued_manual', 'issued_referrals', 'removed_manual', 'redeemed', 'expired', 'clawed_back', 'pending', 'active_members', 'members'],
  },
  { table: 'insight_rewards', days: 'insight_reward_days', keys: ['reward_id'], columns: ['codes', 'points', 'discount', 'used', 'expired', 'cancelled'] },
];

/**
 * Issue 38, item 6: a 90-day series of a shop with a year of history read 34,000 bucket rows (the
 * balance before the range sums every bucket before it; the range groups 96 a day) and 5,000 of
 * its rewards', most of the query's 23 ms, and 8 readers at once queued on it. Compaction, which
 * folds a past bucket's stripes into one row, now also adds what it folds into the shop's local
 * day, in the same statement: a day series reads one row per folded day, and the rows still
 * striped (recent or late) beside them. The folded bucket rows stay, for hours.
 */
export async function up(db: Kysely<any>): Promise<void> {
  // The start of the shop's local day holding `at`, as src/domain/insights places it: a day of the
  // shop's zone, or, before its last change of zone, of the period (shop_timezones) holding `at`,
  // with the day carried over a change starting where it started.
  await sql`
    create function insight_day_start(shop text, at timestamptz) returns timestamptz language sql stable as $$
      select case when s.timezone_days_from is null or at >= s.timezone_days_from
          then date_trunc('day', at at time zone s.timezone) at time zone s.timezone
          else (select case when at < p.carried_until then p.carried_from else date_trunc('day', at at time zone p.timezone) at time zone p.timezone end
            from shop_timezones p where p.shop_id = s.id and p.since <= at order by p.since desc limit 1)
        end
      from shops s where s.id = shop
    $$`.execute(db);
  for (const { table, days, keys, columns } of ROLLUPS) {
    const types = columns.map((c) => `${c} ${c === 'discount' ? 'numeric' : 'bigint'} not null default 0`);
    await sql`
      create table ${sql.table(days)} (
        shop_id text not null references shops (id),
        day timestamptz not null,
        ${sql.raw([...keys.map((k) => `${k} text not null`), ...types].join(', '))},
        primary key (${sql.raw(['shop_id', 'day', ...keys].join(', '))})
      )`.execute(db);
    // The rows still striped of one shop, read beside its days (compaction's index is by bucket, for all shops).
    await sql`create index ${sql.raw(`${table}_shop_striped_idx`)} on ${sql.table(table)} (shop_id, bucket) where stripe >= 0`.execute(db);
    await sql`
      insert into ${sql.table(days)} (${sql.raw(['shop_id', 'day', ...keys, ...columns].join(', '))})
      select shop_id, insight_day_start(shop_id, bucket), ${sql.raw([...keys, ...columns.map((c) => `sum(${c})`)].join(', '))}
      from ${sql.table(table)} where stripe = -1
      group by ${sql.raw(['1', '2', ...keys].join(', '))}`.execute(db);
  }
}

export async function down(db: Kysely<any>): Promise<void> {
  for (const { table, days } of ROLLUPS) {
    await sql`drop index ${sql.raw(`${table}_shop_striped_idx`)}`.execute(db);
    await sql`drop table ${sql.table(days)}`.execute(db);
  }
  await sql`drop function insight_day_start(text, timestamptz)`.execute(db);
}
