// Frozen in time: a migration never imports from src/, so later code changes cannot rewrite history.
// Insights' days across a change of time zone (src/domain/insights.ts, docs/api.md#program-insights).
import { type Kysely, sql } from 'kysely';

/**
 * The local day of an entry written at `r.created_at`: a day of the shop's zone from
 * `timezone_days_from` on (always, for a shop that never changed zone); before it, a day of the zone
 * the shop had then, or the day that was in progress when the zone changed, which goes on until the
 * new zone's next midnight of a later date (shop_timezones below).
 */
const ENTRY_DAY = `case when s.timezone_days_from is null or r.created_at >= s.timezone_days_from
    then (r.created_at at time zone s.timezone)::date
    else (select case when r.created_at < p.carried_until then p.carried_day else (r.created_at at time zone p.timezone)::date end
      from shop_timezones p where p.shop_id = r.shop_id and p.since <= r.created_at order by p.since desc limit 1)
  end`;

/**
 * Marks the customers of `source`'s rows active on their local day and counts those not marked
 * before into the rollup of the first marking entry's bucket, which lies in that day whatever zone
 * the day is of. A marker conflicts only with another write of the same customer, which has
 * already locked the customer's row (every ledger write and pending hold does), so two
 * transactions never wait on each other's markers in opposite orders.
 */
function markActive(source: string, where: string) {
  return sql.raw(`
    with marked as (
      insert into insight_active_days as m (day, shop_id, customer_id, bucket)
      select day, shop_id, customer_id, min(bucket)
      from (
        select ${ENTRY_DAY} as day, r.shop_id, r.customer_id, date_bin('15 minutes', r.created_at, timestamptz '2000-01-01 00:00:00+00') as bucket
        from ${source} r join shops s on s.id = r.shop_id
        where ${where}
      ) e
      group by 1, 2, 3
      order by 1, 2, 3
      on conflict do nothing
      returning m.shop_id, m.bucket
    )
    insert into insight_buckets as b (shop_id, bucket, stripe, active_members)
    select shop_id, bucket, pg_backend_pid(), count(*)
    from marked
    group by 1, 2
    order by 1, 2
    on conflict (shop_id, bucket, stripe) do update set active_members = b.active_members + excluded.active_members`);
}

export async function up(db: Kysely<any>): Promise<void> {
  // Insights count by the shop's local days, and active members (a distinct count, kept by markers
  // per local day) cannot be re-read in another zone's days. So a shop's days are the days of the
  // zone it had at the time: a change of zone starts a period, and every figure of a day before it
  // stays over that day's instants. One row per period; the first ('-infinity') is written by the
  // first change, with the zone the shop had until then.
  //   carried_day: the local day in progress at `since`; it goes on (from carried_from) until
  //   carried_until, the new zone's first midnight of a later date, so a day is never cut short,
  //   and no date comes twice (a move west would otherwise start the same date again).
  await sql`
    create table shop_timezones (
      shop_id text not null references shops (id),
      since timestamptz not null,
      timezone text not null,
      carried_day date,
      carried_from timestamptz,
      carried_until timestamptz,
      primary key (shop_id, since)
    )`.execute(db);
  // Where the shop's days became plain days of shops.timezone (the end of the last change's carried
  // day); null: they always were. An entry before it looks its period up (ENTRY_DAY).
  await sql`alter table shops add column timezone_days_from timestamptz`.execute(db);
  // The bucket whose rollup counted the marker: an instant of its day (a day's local midnight is an
  // instant of that day only in the zone that drew it).
  await sql`alter table insight_active_days add column bucket timestamptz`.execute(db);

  await sql`
    create or replace function activities_active_members() returns trigger language plpgsql as $$
    begin
      ${markActive('new_rows', `r.type <> 'expire_points'`)};
      return null;
    end $$`.execute(db);
  await sql`
    create or replace function pending_points_active_members() returns trigger language plpgsql as $$
    begin
      ${markActive('new_rows', 'true')};
      return null;
    end $$`.execute(db);
  // Rollups already written stay where they are: each counted a local day at its midnight's bucket,
  // which is an instant of that day in the zone the shop has now. A shop that changed zone before
  // this migration keeps what it showed (its earlier zone is not recorded anywhere).
}

export async function down(db: Kysely<any>): Promise<void> {
  // The functions as migration 2026_11_25_014 wrote them.
  const before = (source: string, where: string) =>
    sql.raw(`
    with marked as (
      insert into insight_active_days as m (day, shop_id, customer_id)
      select distinct (r.created_at at time zone s.timezone)::date, r.shop_id, r.customer_id
      from ${source} r join shops s on s.id = r.shop_id
      where ${where}
      order by 1, 2, 3
      on conflict do nothing
      returning m.shop_id, m.day
    )
    insert into insight_buckets as b (shop_id, bucket, stripe, active_members)
    select m.shop_id, date_bin('15 minutes', m.day::timestamp at time zone s.timezone, timestamptz '2000-01-01 00:00:00+00'), pg_backend_pid(), count(*)
    from marked m join shops s on s.id = m.shop_id
    group by 1, 2
    order by 1, 2
    on conflict (shop_id, bucket, stripe) do update set active_members = b.active_members + excluded.active_members`);
  await sql`
    create or replace function activities_active_members() returns trigger language plpgsql as $$
    begin
      ${before('new_rows', `r.type <> 'expire_points'`)};
      return null;
    end $$`.execute(db);
  await sql`
    create or replace function pending_points_active_members() returns trigger language plpgsql as $$
    begin
      ${before('new_rows', 'true')};
      return null;
    end $$`.execute(db);
  await sql`alter table insight_active_days drop column bucket`.execute(db);
  await sql`alter table shops drop column timezone_days_from`.execute(db);
  await sql`drop table shop_timezones`.execute(db);
}
