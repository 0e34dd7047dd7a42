// Frozen in time: a migration never imports from src/, so later code changes cannot rewrite history.
import { type Kysely, sql } from 'kysely';

/**
 * Issue 33: a discount code's life (DESIGN.md "Rewards at checkout"). A code is `issued`, then
 * exactly one of `used` (by an order that carries it), `expired` (its reward's expiry, by the
 * scheduler) or `cancelled` (by the shop). The points a code cost come back at most once
 * (`returned_activity_id`: the refund_redemption entry), where the shop says so.
 *
 * Orders keep the codes they carried (`discount_codes`, as given: unknown ones too). Shops say
 * whether an expired code, or a fully refunded or cancelled order's codes, give their points back,
 * and how many days before a code's expiry its warning goes out (0: none).
 *
 * insight_rewards counts each code's end by reward and bucket, at the instant of that end (used_at,
 * expires_at, cancelled_at), kept by a statement trigger as the issue counts are.
 */
export async function up(db: Kysely<any>): Promise<void> {
  await sql`
    alter table discount_codes
      add column status text not null default 'issued' check (status in ('issued', 'used', 'expired', 'cancelled')),
      add column used_at timestamptz,
      add column order_id text,
      add column other_customer boolean not null default false,
      add column cancelled_at timestamptz,
      add column warned_at timestamptz,
      add column returned_activity_id text`.execute(db);
  // Due expiries and warnings: issued codes by their expiry.
  await sql`create index discount_codes_expiry_idx on discount_codes (expires_at) where status = 'issued' and expires_at is not null`.execute(db);

  await sql`alter table orders add column discount_codes jsonb not null default '[]'::jsonb`.execute(db);

  await sql`
    alter table shops
      add column return_points_on_code_expiry boolean not null default false,
      add column return_code_points_on_refund boolean not null default false,
      add column code_warning_days int not null default 0`.execute(db);

  await sql`
    alter table insight_rewards
      add column used bigint not null default 0,
      add column expired bigint not null default 0,
      add column cancelled bigint not null default 0`.execute(db);
  await sql`
    create function discount_codes_ended_insights() returns trigger language plpgsql as $$
    begin
      insert into insight_rewards as r (shop_id, reward_id, bucket, stripe, used, expired, cancelled)
      select n.shop_id, n.reward_id,
        -- The instant of the end; a code without an expiry ended as expired (by hand) counts now.
        date_bin('15 minutes', coalesce(case n.status when 'used' then n.used_at when 'expired' then n.expires_at else n.cancelled_at end, now()),
          timestamptz '2000-01-01 00:00:00+00'),
        pg_backend_pid(),
        count(*) filter (where n.status = 'used'), count(*) filter (where n.status = 'expired'), count(*) filter (where n.status = 'cancelled')
      from new_rows n join old_rows o on o.id = n.id
      where o.status = 'issued' and n.status <> 'issued'
      group by 1, 2, 3
      order by 1, 3, 2
      on conflict (shop_id, bucket, reward_id, stripe) do update set
        used = r.used + excluded.used, expired = r.expired + excluded.expired, cancelled = r.cancelled + excluded.cancelled;
      return null;
    end $$`.execute(db);
  await sql`
    create trigger discount_codes_ended_insights after update on discount_codes
    referencing old table as old_rows new table as new_rows for each statement execute function discount_codes_ended_insights()`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`drop trigger discount_codes_ended_insights on discount_codes`.execute(db);
  await sql`drop function discount_codes_ended_insights()`.execute(db);
  await sql`alter table insight_rewards drop column used, drop column expired, drop column cancelled`.execute(db);
  await sql`alter table shops drop column return_points_on_code_expiry, drop column return_code_points_on_refund, drop column code_warning_days`.execute(db);
  await sql`alter table orders drop column discount_codes`.execute(db);
  await sql`drop index discount_codes_expiry_idx`.execute(db);
  await sql`
    alter table discount_codes
      drop column status, drop column used_at, drop column order_id, drop column other_customer,
      drop column cancelled_at, drop column warned_at, drop column returned_activity_id`.execute(db);
}
