// Frozen in time: a migration never imports from src/, so later code changes cannot rewrite history.
import { type Kysely, sql } from 'kysely';

/**
 * Issue 31, item 11: the points_earned metric falls by every point an order no longer earns, on
 * the days its points counted on. Until now a clawback lowered it by what the balance gave back,
 * on the day of the refund: points already spent (`unrecovered_points`) never left it, so a
 * bought-and-returned order kept its tier; and a December order returned in January stayed in
 * December's calendar year.
 *
 * An order's points are now the orders trigger's, from the order's own counters: what it has
 * made available (earned − clawed back − still pending) counts on the day each part became
 * available (`tier_order_points`, per order and day), and what it gives back is taken from its
 * latest days first, whether the balance could give it back or not. The ledger trigger counts
 * everything else (sign-ups, birthdays, actions, referrals, adds).
 */
export async function up(db: Kysely<any>): Promise<void> {
  // Each order's points in the metric, by the shop-local day they counted on. Rows of an order are
  // touched only by its writers, under its row lock; no foreign key to orders, so a deleted order's
  // days can still be found by the trigger that takes them out of the metric.
  await sql`
    create table tier_order_points (
      order_id text not null,
      day date not null,
      customer_id text not null references customers (id) on delete cascade,
      points bigint not null,
      primary key (order_id, day)
    )`.execute(db);
  await sql`create index tier_order_points_customer_idx on tier_order_points (customer_id)`.execute(db);

  // What an order has made available: the points it holds less those still pending.
  await sql`
    create function tier_available(earned bigint, clawed_back bigint, pending bigint) returns bigint
    language sql immutable parallel safe
    return earned - clawed_back - pending`.execute(db);

  // Each order's fall (a negative change) leaves its latest days first; returns what left which day.
  await sql`
    create function tier_order_fall(orders text[], changes bigint[]) returns table (customer_id text, day date, points bigint)
    language sql as $$
      with taken as (
        select p.order_id, p.day, least(p.points, greatest(-w.change - coalesce(sum(p.points) over (partition by p.order_id order by p.day desc
          rows between unbounded preceding and 1 preceding), 0), 0)) as points
        from unnest(orders, changes) as w(order_id, change) join tier_order_points p on p.order_id = w.order_id
        where w.change < 0
      )
      update tier_order_points p set points = p.points - t.points
      from taken t where p.order_id = t.order_id and p.day = t.day and t.points > 0
      returning p.customer_id, p.day, t.points
    $$`.execute(db);

  // The ledger keeps points_earned for everything but orders' own entries (as activities_tiers did).
  await sql`
    create function activities_tier_points() returns trigger language plpgsql as $$
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
        where s.tiers_on and n.setting_type <> 'order' and tier_points(n.type, n.old_points, n.new_points) <> 0
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

  // Every order write (and delete) keeps both metrics: amount_spent as orders_tiers did (the old
  // amount out of the order's day, the new one in), and the order's available points: a rise
  // counts on the day of the write, a fall is taken from the order's latest days.
  await sql`
    create function orders_tier_metric() returns trigger language plpgsql as $$
    declare
      customer_ids text[] := '{}';
      order_ids text[] := '{}';
      order_days date[] := '{}';
      write_days date[] := '{}';
      spent bigint[] := '{}';
      available bigint[] := '{}';
      changed_at timestamptz;
      changed_orders text[];
      changed_customers text[];
      changed_days date[];
      changes bigint[];
      ids text[];
    begin
      if tg_op = 'DELETE' then
        if not exists (select 1 from old_rows o join shops s on s.id = o.shop_id where s.tiers_on) then
          return null;
        end if;
      elsif not exists (select 1 from new_rows n join shops s on s.id = n.shop_id where s.tiers_on) then
        return null;
      end if;
      if tg_op <> 'INSERT' then
        -- A customer being deleted takes its orders along: nothing of theirs is kept any more.
        select array_agg(o.customer_id), array_agg(o.id), array_agg((coalesce(o.processed_at, o.created_at) at time zone s.timezone)::date),
          array_agg(null::date), array_agg(-tier_spent(o.status, o.currency, o.total_minor, o.refunded_minor, s.currency)),
          array_agg(-tier_available(o.points_earned, o.points_clawed_back, o.points_pending))
        into customer_ids, order_ids, order_days, write_days, spent, available
        from old_rows o join shops s on s.id = o.shop_id
        where s.tiers_on and (tg_op = 'UPDATE' or exists (select 1 from customers c where c.id = o.customer_id));
      end if;
      if tg_op <> 'DELETE' then
        select coalesce(customer_ids, '{}') || array_agg(n.customer_id), coalesce(order_ids, '{}') || array_agg(n.id),
          coalesce(order_days, '{}') || array_agg((coalesce(n.processed_at, n.created_at) at time zone s.timezone)::date),
          coalesce(write_days, '{}') || array_agg((n.updated_at at time zone s.timezone)::date),
          coalesce(spent, '{}') || array_agg(tier_spent(n.status, n.currency, n.total_minor, n.refunded_minor, s.currency)),
          coalesce(available, '{}') || array_agg(tier_available(n.points_earned, n.points_clawed_back, n.points_pending)), max(n.updated_at)
        into customer_ids, order_ids, order_days, write_days, spent, available, changed_at
        from new_rows n join shops s on s.id = n.shop_id where s.tiers_on;
      end if;

      -- Each order's change of available points, in key order.
      select array_agg(order_id order by order_id), array_agg(customer_id order by order_id), array_agg(day order by order_id), array_agg(change order by order_id)
      into changed_orders, changed_customers, changed_days, changes
      from (select c.order_id, c.customer_id, max(c.day) as day, sum(c.points) as change
        from unnest(order_ids, customer_ids, write_days, available) as c(order_id, customer_id, day, points) group by 1, 2) d
      where change <> 0;
      -- A rise counts on the day of the write.
      insert into tier_order_points as p (order_id, day, customer_id, points)
      select c.order_id, c.day, c.customer_id, c.change from unnest(changed_orders, changed_customers, changed_days, changes) as c(order_id, customer_id, day, change)
      where c.change > 0
      on conflict (order_id, day) do update set points = p.points + excluded.points;
      with fell as (
        select * from tier_order_fall(changed_orders, changes)
      ), d as (
        insert into tier_metric_days as b (customer_id, day, spent, points)
        select c.customer_id, c.day, sum(c.spent), sum(c.points) from (
          select o.customer_id, o.day, o.spent, 0::bigint as points from unnest(customer_ids, order_days, spent) as o(customer_id, day, spent)
          union all
          select r.customer_id, r.day, 0, r.change from unnest(changed_customers, changed_days, changes) as r(customer_id, day, change) where r.change > 0
          union all
          select f.customer_id, f.day, 0, -f.points from fell f
        ) c
        group by 1, 2 having sum(c.spent) <> 0 or sum(c.points) <> 0 order by 1, 2
        on conflict (customer_id, day) do update set spent = b.spent + excluded.spent, points = b.points + excluded.points
        returning b.customer_id
      )
      select array_agg(distinct customer_id) into ids from d;
      if tg_op = 'DELETE' then
        delete from tier_order_points where order_id = any(order_ids);
      elsif ids is not null then
        perform tier_upgrade(ids, changed_at);
      end if;
      return null;
    end $$`.execute(db);
  for (const [op, tables] of [
    ['insert', 'new table as new_rows'],
    ['update', 'old table as old_rows new table as new_rows'],
  ] as const) {
    await sql`drop trigger ${sql.raw(`orders_tiers_${op}`)} on orders`.execute(db);
    await sql`create trigger ${sql.raw(`orders_tiers_${op}`)} after ${sql.raw(op)} on orders
      referencing ${sql.raw(tables)} for each statement execute function orders_tier_metric()`.execute(db);
  }
  await sql`create trigger orders_tiers_delete after delete on orders
    referencing old table as old_rows for each statement execute function orders_tier_metric()`.execute(db);
  await sql`drop trigger activities_tiers on activities`.execute(db);
  await sql`create trigger activities_tiers after insert on activities
    referencing new table as new_rows for each statement execute function activities_tier_points()`.execute(db);
  // The functions they replace are kept for down().

  // A shop's metric from its history, as if the triggers had always kept it: the ledger but for
  // orders' entries; each order's credits on the days they became available (its earn_points
  // entries, which name it: "order <id>" or "order <id>, pending until <date>"), less what it gave
  // back since, from its latest days; and amount_spent on each order's day. The shop's first tier
  // calls it (src/domain/tiers.ts), under the shop's lock.
  await sql`
    create function tier_metric_rebuild(shop text) returns void language plpgsql as $$
    declare
      zone text := (select timezone from shops where id = shop);
      falling text[];
      changes bigint[];
    begin
      delete from tier_order_points p using customers c where c.shop_id = shop and p.customer_id = c.id;
      delete from tier_metric_days d using customers c where c.shop_id = shop and d.customer_id = c.id;
      insert into tier_order_points (order_id, day, customer_id, points)
      select o.id, (a.created_at at time zone zone)::date, o.customer_id, sum(a.new_points - a.old_points)
      from orders o join activities a on a.customer_id = o.customer_id and a.type = 'earn_points' and a.setting_type = 'order'
        and (a.description = 'order ' || o.order_id or starts_with(a.description, 'order ' || o.order_id || ', pending until '))
      where o.shop_id = shop
      group by 1, 2, 3;
      select array_agg(x.order_id), array_agg(x.change) into falling, changes from (
        select p.order_id, max(tier_available(o.points_earned, o.points_clawed_back, o.points_pending)) - sum(p.points) as change
        from tier_order_points p join orders o on o.id = p.order_id where o.shop_id = shop group by 1) x
      where x.change < 0;
      perform from tier_order_fall(falling, changes);
      with days as (
        select a.customer_id, (a.created_at at time zone zone)::date as day, tier_points(a.type, a.old_points, a.new_points) as points, 0::bigint as spent
        from activities a where a.shop_id = shop and a.setting_type <> 'order' and tier_points(a.type, a.old_points, a.new_points) <> 0
        union all
        select p.customer_id, p.day, p.points, 0 from tier_order_points p join customers c on c.id = p.customer_id where c.shop_id = shop
        union all
        select o.customer_id, (coalesce(o.processed_at, o.created_at) at time zone zone)::date, 0, tier_spent(o.status, o.currency, o.total_minor, o.refunded_minor, s.currency)
        from orders o join shops s on s.id = o.shop_id where o.shop_id = shop
      ), kept as (
        insert into tier_metric_days (customer_id, day, points, spent)
        select customer_id, day, sum(points), sum(spent) from days group by 1, 2
        returning customer_id
      )
      insert into tier_members (customer_id, shop_id) select distinct customer_id, shop from kept
      on conflict (customer_id) do nothing;
    end $$`.execute(db);

  // Shops that keep a metric already: rebuilt, so it holds what they have given back too. Their
  // members keep their tiers; the next daily evaluation judges them on the exact metric.
  await sql`select tier_metric_rebuild(id) from shops where tiers_on order by id`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`drop trigger activities_tiers on activities`.execute(db);
  await sql`create trigger activities_tiers after insert on activities
    referencing new table as new_rows for each statement execute function activities_tiers()`.execute(db);
  await sql`drop trigger orders_tiers_delete on orders`.execute(db);
  for (const [op, tables] of [
    ['insert', 'new table as new_rows'],
    ['update', 'old table as old_rows new table as new_rows'],
  ] as const) {
    await sql`drop trigger ${sql.raw(`orders_tiers_${op}`)} on orders`.execute(db);
    await sql`create trigger ${sql.raw(`orders_tiers_${op}`)} after ${sql.raw(op)} on orders
      referencing ${sql.raw(tables)} for each statement execute function orders_tiers()`.execute(db);
  }
  await sql`drop function tier_metric_rebuild(text)`.execute(db);
  await sql`drop function orders_tier_metric()`.execute(db);
  await sql`drop function activities_tier_points()`.execute(db);
  await sql`drop function tier_order_fall(text[], bigint[])`.execute(db);
  await sql`drop function tier_available(bigint, bigint, bigint)`.execute(db);
  await sql`drop table tier_order_points`.execute(db);
}
