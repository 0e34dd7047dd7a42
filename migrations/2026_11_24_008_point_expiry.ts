// Frozen in time: a migration never imports from src/, so later code changes cannot rewrite history.
import { type Kysely, sql } from 'kysely';

export async function up(db: Kysely<any>): Promise<void> {
  // DESIGN.md "Expiry": none, inactivity (the whole balance, N days after the last points
  // activity) or per_earn (each credit a lot of its own, N days after it became available).
  // Warnings go out warning_days before an expiry; 0: none.
  await sql`
    alter table shops
      add column expiry_mode text not null default 'none' check (expiry_mode in ('none', 'inactivity', 'per_earn')),
      add column expiry_days int not null default 365,
      add column expiry_warning_days int not null default 0`.execute(db);

  // per_earn: a shop's live lots. A customer's lots always sum to their balance; a lot drawn to 0 is deleted.
  await sql`
    create table point_lots (
      id bigint generated always as identity primary key,
      shop_id text not null,
      customer_id text not null references customers (id) on delete cascade,
      points int not null check (points > 0),
      expires_at timestamptz not null,
      warn_at timestamptz,
      created_at timestamptz not null
    )`.execute(db);
  await sql`create index point_lots_customer_idx on point_lots (customer_id, expires_at, id)`.execute(db);
  await sql`create index point_lots_due_idx on point_lots (expires_at)`.execute(db);
  await sql`create index point_lots_warn_idx on point_lots (warn_at) where warn_at is not null`.execute(db);

  // inactivity: when each customer's balance expires, moved by every points activity.
  await sql`
    create table expiry_timers (
      customer_id text primary key references customers (id) on delete cascade,
      shop_id text not null,
      expires_at timestamptz not null,
      warn_at timestamptz
    )`.execute(db);
  await sql`create index expiry_timers_due_idx on expiry_timers (expires_at)`.execute(db);
  await sql`create index expiry_timers_warn_idx on expiry_timers (warn_at) where warn_at is not null`.execute(db);

  // A warning goes out once per customer per expiry date; the row goes when that date has passed.
  await sql`
    create table expiry_warnings (
      customer_id text not null references customers (id) on delete cascade,
      expires_at timestamptz not null,
      primary key (customer_id, expires_at)
    )`.execute(db);

  // When points credited at `at` expire: at the end of the shop-local day `days` after, i.e. the
  // start of the next one (a customer can spend them on their last day, whatever the DST).
  await sql`
    create function expiry_at(at timestamptz, zone text, days int) returns timestamptz
    language sql immutable parallel safe
    return (((at at time zone zone)::date + days + 1)::timestamp at time zone zone)`.execute(db);
  await sql`
    create function expiry_warn_at(expires timestamptz, zone text, warning_days int) returns timestamptz
    language sql immutable parallel safe
    return case when warning_days > 0 then (((expires at time zone zone)::date - warning_days)::timestamp at time zone zone) end`.execute(db);

  // Every ledger entry, whatever wrote it (points API, orders, rules, redemptions, referrals,
  // imports, expiry itself), keeps the shop's expiry state in the same statement: a credit
  // becomes a lot, a debit draws the lots that expire soonest, and any activity but an expiry
  // moves the inactivity timer. One trigger rather than code in each writer, so no debit path can
  // forget it. A statement's credits become lots (a batch of new orders may credit one customer
  // several times), then its debits draw, summed per customer; no writer mixes both for one customer.
  await sql`
    create function activities_expiry() returns trigger language plpgsql as $$
    begin
      -- Most shops expire nothing: one probe of the statement's shops, and done.
      if not exists (select 1 from new_rows n join shops s on s.id = n.shop_id where s.expiry_mode <> 'none') then
        return null;
      end if;

      insert into point_lots (shop_id, customer_id, points, expires_at, warn_at, created_at)
      select n.shop_id, n.customer_id, n.new_points - n.old_points, e.expires_at,
        expiry_warn_at(e.expires_at, s.timezone, s.expiry_warning_days), n.created_at
      from new_rows n join shops s on s.id = n.shop_id
      cross join lateral (select expiry_at(n.created_at, s.timezone, s.expiry_days) as expires_at) e
      where s.expiry_mode = 'per_earn' and n.new_points > n.old_points;

      with debit as (
        select n.customer_id, sum(n.old_points - n.new_points) as points
        from new_rows n join shops s on s.id = n.shop_id
        where s.expiry_mode = 'per_earn' and n.new_points < n.old_points
        group by n.customer_id
      ), drawn as (
        select l.id, l.points, d.points - (sum(l.points) over w - l.points) as left_to_draw
        from debit d join point_lots l on l.customer_id = d.customer_id
        window w as (partition by l.customer_id order by l.expires_at, l.id)
      ), emptied as (
        delete from point_lots l using drawn d where l.id = d.id and d.left_to_draw >= d.points
      )
      update point_lots l set points = l.points - d.left_to_draw
      from drawn d where l.id = d.id and d.left_to_draw > 0 and d.left_to_draw < d.points;

      insert into expiry_timers (customer_id, shop_id, expires_at, warn_at)
      select distinct on (n.customer_id) n.customer_id, n.shop_id, e.expires_at, expiry_warn_at(e.expires_at, s.timezone, s.expiry_warning_days)
      from new_rows n join shops s on s.id = n.shop_id
      cross join lateral (select expiry_at(n.created_at, s.timezone, s.expiry_days) as expires_at) e
      where s.expiry_mode = 'inactivity' and n.type <> 'expire_points'
      order by n.customer_id, n.seq desc
      on conflict (customer_id) do update set expires_at = excluded.expires_at, warn_at = excluded.warn_at;
      return null;
    end $$`.execute(db);
  await sql`
    create trigger activities_expiry after insert on activities
    referencing new table as new_rows for each statement execute function activities_expiry()`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`drop trigger activities_expiry on activities`.execute(db);
  await sql`drop function activities_expiry()`.execute(db);
  await sql`drop function expiry_warn_at(timestamptz, text, int)`.execute(db);
  await sql`drop function expiry_at(timestamptz, text, int)`.execute(db);
  await sql`drop table expiry_warnings`.execute(db);
  await sql`drop table expiry_timers`.execute(db);
  await sql`drop table point_lots`.execute(db);
  await sql`alter table shops drop column expiry_mode, drop column expiry_days, drop column expiry_warning_days`.execute(db);
}
