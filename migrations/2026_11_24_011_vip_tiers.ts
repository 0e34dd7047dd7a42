// Frozen in time: a migration never imports from src/, so later code changes cannot rewrite history.
import { type Kysely, sql } from 'kysely';

export async function up(db: Kysely<any>): Promise<void> {
  // DESIGN.md "VIP tiers": a metric (points_earned or amount_spent) over a window (lifetime,
  // calendar_year, rolling_days N). tiers_on: the shop has tiers, so its metric is kept.
  await sql`
    alter table shops
      add column tier_metric text not null default 'points_earned' check (tier_metric in ('points_earned', 'amount_spent')),
      add column tier_window text not null default 'lifetime' check (tier_window in ('lifetime', 'calendar_year', 'rolling_days')),
      add column tier_window_days int not null default 365,
      add column tiers_on boolean not null default false`.execute(db);

  // threshold: points, or minor units of the shop's currency (amount_spent). Unique per shop: two
  // tiers never overlap. multiplier_bp: the place_order multiplier in basis points (10,000 = ×1).
  await sql`
    create table tiers (
      id text primary key,
      shop_id text not null references shops (id) on delete cascade,
      name text not null,
      threshold bigint not null check (threshold >= 0),
      multiplier_bp int not null check (multiplier_bp between 10000 and 1000000),
      created_at timestamptz not null default now(),
      updated_at timestamptz not null default now(),
      unique (shop_id, threshold)
    )`.execute(db);
  await sql`create unique index tiers_shop_name_key on tiers (shop_id, lower(name))`.execute(db);

  // Every customer the shop's tier program has seen, and the tier they hold (null: none). A row of
  // its own, not a column of customers: upgrades and the daily evaluation never touch the hot table.
  await sql`
    create table tier_members (
      customer_id text primary key references customers (id) on delete cascade,
      shop_id text not null,
      tier_id text references tiers (id),
      since timestamptz
    )`.execute(db);
  await sql`create index tier_members_shop_idx on tier_members (shop_id, customer_id)`.execute(db);
  await sql`create index tier_members_tier_idx on tier_members (tier_id) where tier_id is not null`.execute(db);

  // The metric, per customer and shop-local day: any window is a range of days.
  await sql`
    create table tier_metric_days (
      customer_id text not null references customers (id) on delete cascade,
      day date not null,
      points bigint not null default 0,
      spent bigint not null default 0,
      primary key (customer_id, day)
    )`.execute(db);

  // The daily evaluation walks a shop's members in batches: where the current day's walk stands.
  await sql`alter table shop_day_runs add column after_id text`.execute(db);

  // What a ledger entry adds to points_earned: credits from rules and adds, net of clawbacks.
  await sql`
    create function tier_points(type text, old_points bigint, new_points bigint) returns bigint
    language sql immutable parallel safe
    return case when type in ('add_points', 'earn_points', 'referral_reward', 'clawback_points') then new_points - old_points else 0 end`.execute(db);
  // What an order adds to amount_spent: what the shop kept of it, in the shop's currency only.
  await sql`
    create function tier_spent(status text, currency text, total_minor bigint, refunded_minor bigint, shop_currency text) returns bigint
    language sql immutable parallel safe
    return case when status in ('paid', 'partially_refunded', 'refunded') and currency = shop_currency then greatest(total_minor - refunded_minor, 0) else 0 end`.execute(db);

  // Customers' metrics at \`as_of\` over the shop's window, one row per id (0 without any); with_prior:
  // for calendar_year, the better of this year and last (qualifying in year Y keeps the tier
  // through Y+1). Sets of ids, so an evaluation batch is one call.
  await sql`
    create function tier_values(ids text[], metric text, win text, win_days int, zone text, as_of timestamptz, with_prior boolean)
    returns table (member_id text, metric_value bigint) language sql stable parallel safe as $$
      select c.id, coalesce(greatest(
        sum(m.v) filter (where win = 'lifetime' or (win = 'rolling_days' and d.day > t.today - win_days) or (win = 'calendar_year' and d.day >= t.this_year)),
        sum(m.v) filter (where with_prior and win = 'calendar_year' and d.day >= t.this_year - interval '1 year' and d.day < t.this_year)), 0)::bigint
      from (select (as_of at time zone zone)::date as today) x
      cross join lateral (select x.today, date_trunc('year', x.today)::date as this_year) t
      cross join unnest(ids) as c(id)
      left join tier_metric_days d on d.customer_id = c.id and d.day <= t.today
      cross join lateral (select case when metric = 'amount_spent' then d.spent else d.points end as v) m
      group by c.id
    $$`.execute(db);

  // The highest tier of the shop whose threshold the value reaches.
  await sql`
    create function tier_for(shop text, value bigint) returns text
    language sql stable parallel safe
    return (select t.id from tiers t where t.shop_id = shop and t.threshold <= value order by t.threshold desc limit 1)`.execute(db);

  // A tiers/changed event's data (the tier as events show it: id, name, multiplier).
  await sql`
    create function tier_event(customer text, from_tier text, to_tier text, reason text) returns jsonb
    language sql stable
    return jsonb_build_object('customer', customer, 'reason', reason,
      'previousTier', (select jsonb_build_object('id', t.id, 'name', t.name, 'multiplier', trim_scale(t.multiplier_bp / 10000.0)::text) from tiers t where t.id = from_tier),
      'tier', (select jsonb_build_object('id', t.id, 'name', t.name, 'multiplier', trim_scale(t.multiplier_bp / 10000.0)::text) from tiers t where t.id = to_tier))`.execute(db);
  await sql`
    create function new_event_id() returns text language sql volatile
    return 'evt_' || substr(replace(gen_random_uuid()::text, '-', ''), 1, 24)`.execute(db);

  // Upgrade at once: the customers' tiers rise to what their metric reaches at \`as_of\`, never fall
  // (a fall waits for the daily evaluation). Their member rows are locked first, so what is
  // compared is what the last committed writer left.
  await sql`
    create function tier_upgrade(ids text[], as_of timestamptz) returns void language plpgsql as $$
    begin
      insert into tier_members (customer_id, shop_id)
      select c.id, c.shop_id from customers c join shops s on s.id = c.shop_id where c.id = any(ids) and s.tiers_on
      order by c.id
      on conflict (customer_id) do nothing;
      perform 1 from tier_members where customer_id = any(ids) order by customer_id for update;
      with target as (
        select m.customer_id, m.shop_id, m.tier_id as held, tier_for(m.shop_id, v.metric_value) as tier_id
        from tier_members m join shops s on s.id = m.shop_id
        cross join lateral tier_values(array[m.customer_id], s.tier_metric, s.tier_window, s.tier_window_days, s.timezone, as_of, true) v
        where m.customer_id = any(ids)
      ), raised as (
        update tier_members m set tier_id = t.tier_id, since = as_of
        from target t join tiers n on n.id = t.tier_id left join tiers h on h.id = t.held
        where m.customer_id = t.customer_id and (h.id is null or n.threshold > h.threshold)
        returning m.customer_id, m.shop_id, t.held, t.tier_id
      )
      insert into outbox_events (id, shop_id, type, data)
      select new_event_id(), shop_id, 'tiers/changed', tier_event(customer_id, held, tier_id, 'upgrade') from raised order by customer_id;
    end $$`.execute(db);

  // Every ledger entry, whatever wrote it, keeps points_earned in the same statement (as the
  // expiry trigger keeps lots): no writer can forget it. Shops without tiers: one probe, and done.
  await sql`
    create function activities_tiers() returns trigger language plpgsql as $$
    declare
      ids text[];
    begin
      if not exists (select 1 from new_rows n join shops s on s.id = n.shop_id where s.tiers_on) then
        return null;
      end if;
      with d as (
        insert into tier_metric_days as b (customer_id, day, points)
        select n.customer_id, (n.created_at at time zone s.timezone)::date, sum(tier_points(n.type, n.old_points, n.new_points))
        from new_rows n join shops s on s.id = n.shop_id
        where s.tiers_on and tier_points(n.type, n.old_points, n.new_points) <> 0
        group by 1, 2
        order by 1, 2
        on conflict (customer_id, day) do update set points = b.points + excluded.points
        returning b.customer_id
      )
      select array_agg(distinct customer_id) into ids from d;
      if ids is not null then
        perform tier_upgrade(ids, (select max(created_at) from new_rows));
      end if;
      return null;
    end $$`.execute(db);
  await sql`
    create trigger activities_tiers after insert on activities
    referencing new table as new_rows for each statement execute function activities_tiers()`.execute(db);

  // amount_spent, kept by every order write: an update moves the order's old amount out of its day
  // and the new one in (a refund lowers the day the order counts on).
  await sql`
    create function orders_tiers() returns trigger language plpgsql as $$
    declare
      customer_ids text[] := '{}';
      days date[] := '{}';
      amounts bigint[] := '{}';
      changed_at timestamptz;
      ids text[];
    begin
      if not exists (select 1 from new_rows n join shops s on s.id = n.shop_id where s.tiers_on) then
        return null;
      end if;
      if tg_op = 'UPDATE' then
        select array_agg(o.customer_id), array_agg((coalesce(o.processed_at, o.created_at) at time zone s.timezone)::date),
          array_agg(-tier_spent(o.status, o.currency, o.total_minor, o.refunded_minor, s.currency))
        into customer_ids, days, amounts
        from old_rows o join shops s on s.id = o.shop_id where s.tiers_on;
      end if;
      select coalesce(customer_ids, '{}') || array_agg(n.customer_id), coalesce(days, '{}') || array_agg((coalesce(n.processed_at, n.created_at) at time zone s.timezone)::date),
        coalesce(amounts, '{}') || array_agg(tier_spent(n.status, n.currency, n.total_minor, n.refunded_minor, s.currency)), max(n.updated_at)
      into customer_ids, days, amounts, changed_at
      from new_rows n join shops s on s.id = n.shop_id where s.tiers_on;
      with d as (
        insert into tier_metric_days as b (customer_id, day, spent)
        select c.customer_id, c.day, sum(c.spent) from unnest(customer_ids, days, amounts) as c(customer_id, day, spent)
        group by 1, 2 having sum(c.spent) <> 0 order by 1, 2
        on conflict (customer_id, day) do update set spent = b.spent + excluded.spent
        returning b.customer_id
      )
      select array_agg(distinct customer_id) into ids from d;
      if ids is not null then
        perform tier_upgrade(ids, changed_at);
      end if;
      return null;
    end $$`.execute(db);
  await sql`
    create trigger orders_tiers_insert after insert on orders
    referencing new table as new_rows for each statement execute function orders_tiers()`.execute(db);
  await sql`
    create trigger orders_tiers_update after update on orders
    referencing old table as old_rows new table as new_rows for each statement execute function orders_tiers()`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`drop trigger orders_tiers_update on orders`.execute(db);
  await sql`drop trigger orders_tiers_insert on orders`.execute(db);
  await sql`drop function orders_tiers()`.execute(db);
  await sql`drop trigger activities_tiers on activities`.execute(db);
  await sql`drop function activities_tiers()`.execute(db);
  await sql`drop function tier_upgrade(text[], timestamptz)`.execute(db);
  await sql`drop function new_event_id()`.execute(db);
  await sql`drop function tier_event(text, text, text, text)`.execute(db);
  await sql`drop function tier_for(text, bigint)`.execute(db);
  await sql`drop function tier_values(text[], text, text, int, text, timestamptz, boolean)`.execute(db);
  await sql`drop function tier_spent(text, text, bigint, bigint, text)`.execute(db);
  await sql`drop function tier_points(text, bigint, bigint)`.execute(db);
  await sql`alter table shop_day_runs drop column after_id`.execute(db);
  await sql`drop table tier_metric_days`.execute(db);
  await sql`drop table tier_members`.execute(db);
  await sql`drop table tiers`.execute(db);
  await sql`alter table shops drop column tier_metric, drop column tier_window, drop column tier_window_days, drop column tiers_on`.execute(db);
}
