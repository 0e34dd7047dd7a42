// Frozen in time: a migration never imports from src/, so later code changes cannot rewrite history.
import { type Kysely, sql } from 'kysely';

export async function up(db: Kysely<any>): Promise<void> {
  // Program insights (src/domain/insights.ts): the ledger's movements per shop and 15-minute UTC
  // bucket, by kind, kept by the statement that writes the ledger entries, so an insight is read
  // from at most a few rows per bucket and never by scanning the ledger. Every time zone's offset
  // is a multiple of 15 minutes, so the buckets sum exactly into any shop's local hours and days.
  //
  // One row per shop, bucket and *stripe*, the writing backend's pid modulo 64: concurrent
  // transactions on different connections add to different rows, so no write waits for another's
  // commit on a shop-wide counter. Rows are upserted in (shop, bucket) order: no deadlocks.
  // Amounts are points, positive: issued_* and removed_manual, redeemed, expired, clawed_back.
  await sql`
    create table insight_buckets (
      shop_id text not null references shops (id),
      bucket timestamptz not null,
      stripe smallint not null,
      issued_orders bigint not null default 0,
      issued_rules bigint not null default 0,
      issued_manual bigint not null default 0,
      issued_referrals bigint not null default 0,
      removed_manual bigint not null default 0,
      redeemed bigint not null default 0,
      expired bigint not null default 0,
      clawed_back bigint not null default 0,
      primary key (shop_id, bucket, stripe)
    )`.execute(db);

  await sql`
    create function activities_insights() returns trigger language plpgsql as $$
    begin
      insert into insight_buckets as b (shop_id, bucket, stripe, issued_orders, issued_rules, issued_manual, issued_referrals,
        removed_manual, redeemed, expired, clawed_back)
      select shop_id, date_bin('15 minutes', created_at, timestamptz '2000-01-01 00:00:00+00'), pg_backend_pid() % 64,
        coalesce(sum(d) filter (where type = 'earn_points' and setting_type = 'order'), 0),
        coalesce(sum(d) filter (where type = 'earn_points' and setting_type <> 'order'), 0),
        coalesce(sum(d) filter (where type in ('add_points', 'update_points', 'subtract_points') and d > 0), 0),
        coalesce(sum(d) filter (where type = 'referral_reward'), 0),
        coalesce(-sum(d) filter (where type in ('add_points', 'update_points', 'subtract_points') and d < 0), 0),
        coalesce(-sum(d) filter (where type = 'redeem_points'), 0),
        coalesce(-sum(d) filter (where type = 'expire_points'), 0),
        coalesce(-sum(d) filter (where type = 'clawback_points'), 0)
      from (select shop_id, created_at, type, setting_type, new_points - old_points as d from new_rows where new_points <> old_points) a
      group by 1, 2
      order by 1, 2
      on conflict (shop_id, bucket, stripe) do update set
        issued_orders = b.issued_orders + excluded.issued_orders,
        issued_rules = b.issued_rules + excluded.issued_rules,
        issued_manual = b.issued_manual + excluded.issued_manual,
        issued_referrals = b.issued_referrals + excluded.issued_referrals,
        removed_manual = b.removed_manual + excluded.removed_manual,
        redeemed = b.redeemed + excluded.redeemed,
        expired = b.expired + excluded.expired,
        clawed_back = b.clawed_back + excluded.clawed_back;
      return null;
    end $$`.execute(db);
  await sql`
    create trigger activities_insights after insert on activities
    referencing new table as new_rows for each statement execute function activities_insights()`.execute(db);

  // What the ledger already holds, so a shop's insights start complete.
  await sql`
    insert into insight_buckets (shop_id, bucket, stripe, issued_orders, issued_rules, issued_manual, issued_referrals,
      removed_manual, redeemed, expired, clawed_back)
    select shop_id, date_bin('15 minutes', created_at, timestamptz '2000-01-01 00:00:00+00'), 0,
      coalesce(sum(d) filter (where type = 'earn_points' and setting_type = 'order'), 0),
      coalesce(sum(d) filter (where type = 'earn_points' and setting_type <> 'order'), 0),
      coalesce(sum(d) filter (where type in ('add_points', 'update_points', 'subtract_points') and d > 0), 0),
      coalesce(sum(d) filter (where type = 'referral_reward'), 0),
      coalesce(-sum(d) filter (where type in ('add_points', 'update_points', 'subtract_points') and d < 0), 0),
      coalesce(-sum(d) filter (where type = 'redeem_points'), 0),
      coalesce(-sum(d) filter (where type = 'expire_points'), 0),
      coalesce(-sum(d) filter (where type = 'clawback_points'), 0)
    from (select shop_id, created_at, type, setting_type, new_points - old_points as d from activities where new_points <> old_points) a
    group by 1, 2`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`drop trigger activities_insights on activities`.execute(db);
  await sql`drop function activities_insights()`.execute(db);
  await sql`drop table insight_buckets`.execute(db);
}
