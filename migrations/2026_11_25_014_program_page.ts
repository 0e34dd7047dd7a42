// Frozen in time: a migration never imports from src/, so later code changes cannot rewrite history.
// The program page (/dashboard): members, how many joined and were active each local day
// (src/domain/insights.ts), and the shop's recent ledger entries.
import { type Kysely, sql } from 'kysely';

/**
 * Marks the customers of `source`'s rows active on their local day (the shop's time zone at the
 * time of writing) and counts those not marked before into the rollup of that day's first bucket
 * (its local midnight). A marker conflicts only with another write of the same customer, which
 * has already locked the customer's row (every ledger write and pending hold does), so two
 * transactions never wait on each other's markers in opposite orders.
 */
function markActive(source: string, where: string) {
  return sql.raw(`
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
}

/** Adds (or, for deleted customers, takes) `source`'s customers to the members count of their bucket of creation. */
function memberChange(source: string, sign: '+' | '-') {
  return sql.raw(`
    insert into insight_buckets as b (shop_id, bucket, stripe, members)
    select shop_id, date_bin('15 minutes', created_at, timestamptz '2000-01-01 00:00:00+00'), pg_backend_pid(), ${sign}count(*)
    from ${source}
    group by 1, 2
    order by 1, 2
    on conflict (shop_id, bucket, stripe) do update set members = b.members + excluded.members`);
}

/** Ledger entries that are a member's doing (or the shop's for them): every kind but expiry, which happens to the inactive. */
const LEDGER_ACTIVITY = `r.type <> 'expire_points'`;

export async function up(db: Kysely<any>): Promise<void> {
  // Active members (src/domain/insights.ts): customers with a ledger entry other than an expiry, or
  // an order's pending points, on a local day of their shop. A distinct count per request would
  // read every entry of the range, so each (shop, day, customer) is marked once, by the statement
  // that writes the entry, and the first mark adds 1 to that day's rollup. Markers are needed only
  // while their day can still get entries: the retention loop deletes those of past days.
  await sql`
    create table insight_active_days (
      shop_id text not null,
      day date not null,
      customer_id text not null,
      -- Day first: the retention loop deletes past days by this key's range.
      primary key (day, shop_id, customer_id)
    )`.execute(db);
  await sql`alter table insight_buckets add column active_members bigint not null default 0`.execute(db);

  // Members: customers joined, by their creation's bucket (a deleted one leaves its bucket's
  // count), so the members at any instant are the sum of the buckets before it.
  await sql`alter table insight_buckets add column members bigint not null default 0`.execute(db);
  for (const [op, table, sign] of [['insert', 'new', '+'], ['delete', 'old', '-']] as const) {
    await sql`
      create function ${sql.raw(`customers_${op}_members`)}() returns trigger language plpgsql as $$
      begin
        ${memberChange(`${table}_rows`, sign)};
        return null;
      end $$`.execute(db);
    await sql`
      create trigger ${sql.raw(`customers_${op}_members`)} after ${sql.raw(op)} on customers
      referencing ${sql.raw(table)} table as ${sql.raw(`${table}_rows`)} for each statement execute function ${sql.raw(`customers_${op}_members`)}()`.execute(db);
  }
  await sql`${memberChange('customers', '+')}`.execute(db);

  await sql`
    create function activities_active_members() returns trigger language plpgsql as $$
    begin
      ${markActive('new_rows', LEDGER_ACTIVITY)};
      return null;
    end $$`.execute(db);
  await sql`
    create trigger activities_active_members after insert on activities
    referencing new table as new_rows for each statement execute function activities_active_members()`.execute(db);
  await sql`
    create function pending_points_active_members() returns trigger language plpgsql as $$
    begin
      ${markActive('new_rows', 'true')};
      return null;
    end $$`.execute(db);
  await sql`
    create trigger pending_points_active_members after insert on pending_points
    referencing new table as new_rows for each statement execute function pending_points_active_members()`.execute(db);

  // The shop's ledger newest first (the page's recent activity, keyset by seq): the primary key is
  // (customer_id, seq), which a shop-wide page could only filter and sort.
  await sql`create index activities_shop_seq_idx on activities (shop_id, seq)`.execute(db);

  // History: marked and counted the same way, in one statement; then the markers of past days go.
  await sql`${markActive(
    `(select shop_id, customer_id, created_at from activities r where ${LEDGER_ACTIVITY}
      union all select shop_id, customer_id, created_at from pending_points)`,
    'true',
  )}`.execute(db);
  await sql`delete from insight_active_days where day < (now() - interval '3 days')::date`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`drop index activities_shop_seq_idx`.execute(db);
  for (const op of ['insert', 'delete']) {
    await sql`drop trigger ${sql.raw(`customers_${op}_members`)} on customers`.execute(db);
    await sql`drop function ${sql.raw(`customers_${op}_members`)}()`.execute(db);
  }
  await sql`alter table insight_buckets drop column members`.execute(db);
  await sql`drop trigger pending_points_active_members on pending_points`.execute(db);
  await sql`drop function pending_points_active_members()`.execute(db);
  await sql`drop trigger activities_active_members on activities`.execute(db);
  await sql`drop function activities_active_members()`.execute(db);
  await sql`alter table insight_buckets drop column active_members`.execute(db);
  await sql`drop table insight_active_days`.execute(db);
}
