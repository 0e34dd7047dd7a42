// Frozen in time: a migration never imports from src/, so later code changes cannot rewrite history.
import { type Kysely, sql } from 'kysely';

/**
 * The insert of a set of ledger entries' movements by shop and bucket (the trigger's and the
 * backfill's), from `source` (the trigger's transition table, or the ledger), into `stripe`.
 */
function ledgerMovements(source: string, stripe: string) {
  return sql.raw(`
    insert into insight_buckets as b (shop_id, bucket, stripe, issued_orders, issued_rules, issued_manual, issued_referrals,
      removed_manual, redeemed, expired, clawed_back)
    select shop_id, date_bin('15 minutes', created_at, timestamptz '2000-01-01 00:00:00+00'), ${stripe},
      coalesce(sum(d) filter (where type = 'earn_points' and setting_type = 'order'), 0),
      coalesce(sum(d) filter (where type = 'earn_points' and setting_type <> 'order'), 0),
      coalesce(sum(d) filter (where type in ('add_points', 'update_points', 'subtract_points') and d > 0), 0),
      coalesce(sum(d) filter (where type = 'referral_reward'), 0),
      coalesce(-sum(d) filter (where type in ('add_points', 'update_points', 'subtract_points') and d < 0), 0),
      coalesce(-sum(d) filter (where type = 'redeem_points'), 0),
      coalesce(-sum(d) filter (where type = 'expire_points'), 0),
      coalesce(-sum(d) filter (where type = 'clawback_points'), 0)
    from (select shop_id, created_at, type, setting_type, new_points - old_points as d from ${source} where new_points <> old_points) a`);
}

export async function up(db: Kysely<any>): Promise<void> {
  // Program insights (src/domain/insights.ts): the ledger's movements per shop and 15-minute UTC
  // bucket, by kind, kept by the statement that writes the ledger entries, so an insight is read
  // from at most a few rows per bucket and never by scanning the ledger. Every time zone's offset
  // is a multiple of 15 minutes, so the buckets sum exactly into any shop's local hours and days.
  //
  // One row per shop, bucket and *stripe*, the writing backend's pid (unique among live backends):
  // concurrent transactions on different connections add to different rows, so no write waits for
  // another's commit on a shop-wide counter, and two transactions never lock the same row (no
  // deadlock, whatever the order of their statements). A connection's own rows are upserted in
  // (shop, bucket) order. Folded rows (stripe -1) take what past buckets' stripes held.
  // Amounts are points, positive: issued_* and removed_manual, redeemed, expired, clawed_back.
  await sql`
    create table insight_buckets (
      shop_id text not null references shops (id),
      bucket timestamptz not null,
      stripe integer not null,
      issued_orders bigint not null default 0,
      issued_rules bigint not null default 0,
      issued_manual bigint not null default 0,
      issued_referrals bigint not null default 0,
      removed_manual bigint not null default 0,
      redeemed bigint not null default 0,
      expired bigint not null default 0,
      clawed_back bigint not null default 0,
      -- Points held as pending (an order's, until the shop's pendingDays pass): held minus released or taken back.
      pending bigint not null default 0,
      primary key (shop_id, bucket, stripe)
    )`.execute(db);
  // Compaction (src/domain/insights.ts) folds a past bucket's stripes into one row, stripe -1:
  // the rows still striped are few and recent, found by this index.
  await sql`create index insight_buckets_striped_idx on insight_buckets (bucket, shop_id) where stripe >= 0`.execute(db);

  await sql`
    create function activities_insights() returns trigger language plpgsql as $$
    begin
      ${ledgerMovements('new_rows', 'pg_backend_pid()')}
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

  // Pending points: a row holds its points until released (released_at) or taken back by a refund
  // (points lowered); each statement adds what it changed, at its own time.
  await sql`
    create function pending_points_insights() returns trigger language plpgsql as $$
    begin
      insert into insight_buckets as b (shop_id, bucket, stripe, pending)
      select shop_id, date_bin('15 minutes', now(), timestamptz '2000-01-01 00:00:00+00'), pg_backend_pid(), sum(held)
      from (
        select shop_id, case when released_at is null then points else 0 end as held from new_rows
        union all
        select shop_id, case when released_at is null then -points else 0 end from old_rows
      ) c
      group by 1
      having sum(held) <> 0
      order by 1
      on conflict (shop_id, bucket, stripe) do update set pending = b.pending + excluded.pending;
      return null;
    end $$`.execute(db);
  await sql`
    create function pending_points_inserted_insights() returns trigger language plpgsql as $$
    begin
      insert into insight_buckets as b (shop_id, bucket, stripe, pending)
      select shop_id, date_bin('15 minutes', now(), timestamptz '2000-01-01 00:00:00+00'), pg_backend_pid(), sum(points)
      from new_rows where released_at is null
      group by 1
      order by 1
      on conflict (shop_id, bucket, stripe) do update set pending = b.pending + excluded.pending;
      return null;
    end $$`.execute(db);
  await sql`
    create trigger pending_points_insights_insert after insert on pending_points
    referencing new table as new_rows for each statement execute function pending_points_inserted_insights()`.execute(db);
  await sql`
    create trigger pending_points_insights_update after update on pending_points
    referencing old table as old_rows new table as new_rows for each statement execute function pending_points_insights()`.execute(db);

  // Redemptions by reward: how many codes, the points they cost and the discount they give (in the
  // reward's own unit: money, percent or shipping), per shop, reward and bucket.
  await sql`
    create table insight_rewards (
      shop_id text not null references shops (id),
      reward_id text not null,
      bucket timestamptz not null,
      stripe integer not null,
      codes bigint not null default 0,
      points bigint not null default 0,
      discount numeric not null default 0,
      primary key (shop_id, bucket, reward_id, stripe)
    )`.execute(db);
  await sql`create index insight_rewards_striped_idx on insight_rewards (bucket, shop_id) where stripe >= 0`.execute(db);
  await sql`
    create function discount_codes_insights() returns trigger language plpgsql as $$
    begin
      insert into insight_rewards as r (shop_id, reward_id, bucket, stripe, codes, points, discount)
      select shop_id, reward_id, date_bin('15 minutes', created_at, timestamptz '2000-01-01 00:00:00+00'), pg_backend_pid(),
        count(*), sum(points_amount), sum(value)
      from new_rows
      group by 1, 2, 3
      order by 1, 3, 2
      on conflict (shop_id, bucket, reward_id, stripe) do update set
        codes = r.codes + excluded.codes, points = r.points + excluded.points, discount = r.discount + excluded.discount;
      return null;
    end $$`.execute(db);
  await sql`
    create trigger discount_codes_insights after insert on discount_codes
    referencing new table as new_rows for each statement execute function discount_codes_insights()`.execute(db);
  await sql`
    insert into insight_rewards (shop_id, reward_id, bucket, stripe, codes, points, discount)
    select shop_id, reward_id, date_bin('15 minutes', created_at, timestamptz '2000-01-01 00:00:00+00'), 0, count(*), sum(points_amount), sum(value)
    from discount_codes group by 1, 2, 3`.execute(db);
  await sql`
    insert into insight_buckets (shop_id, bucket, stripe, pending)
    select shop_id, date_bin('15 minutes', created_at, timestamptz '2000-01-01 00:00:00+00'), 0, sum(points)
    from pending_points where released_at is null group by 1, 2`.execute(db);

  // What the ledger already holds, so a shop's insights start complete.
  await sql`${ledgerMovements('activities', '1')} group by 1, 2`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`drop trigger activities_insights on activities`.execute(db);
  await sql`drop function activities_insights()`.execute(db);
  await sql`drop trigger pending_points_insights_insert on pending_points`.execute(db);
  await sql`drop trigger pending_points_insights_update on pending_points`.execute(db);
  await sql`drop function pending_points_insights()`.execute(db);
  await sql`drop function pending_points_inserted_insights()`.execute(db);
  await sql`drop trigger discount_codes_insights on discount_codes`.execute(db);
  await sql`drop function discount_codes_insights()`.execute(db);
  await sql`drop table insight_rewards`.execute(db);
  await sql`drop table insight_buckets`.execute(db);
}
