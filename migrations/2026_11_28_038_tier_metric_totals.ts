// Frozen in time: a migration never imports from src/, so later code changes cannot rewrite history.
import { type Kysely, sql } from 'kysely';

/**
 * Issue 38, item 1: the upgrade on every earn read all of a customer's metric days (a lifetime
 * window, the default, sums every day they ever earned on: 1,100 rows for a long history). Each
 * customer's lifetime sums are now kept in one row beside the days, by a statement trigger on the
 * days (so every writer of days keeps it: the ledger's and the orders' triggers, the rebuild, the
 * reset of a shop's metric); a lifetime value is that row less any days after `as_of` (an index
 * probe, normally empty). The other windows read only their own days, by the index's range.
 */
export async function up(db: Kysely<any>): Promise<void> {
  await sql`
    create table tier_metric_totals (
      customer_id text primary key references customers (id) on delete cascade,
      points bigint not null default 0,
      spent bigint not null default 0
    )`.execute(db);
  await sql`
    insert into tier_metric_totals (customer_id, points, spent)
    select customer_id, sum(points), sum(spent) from tier_metric_days group by 1`.execute(db);

  // Inserts add, deletes take away (an update only: a customer being deleted takes its total
  // along), updates add the difference; in key order, as the days were written.
  await sql`
    create function tier_metric_days_totals() returns trigger language plpgsql as $$
    begin
      if tg_op = 'DELETE' then
        update tier_metric_totals t set points = t.points - o.points, spent = t.spent - o.spent
        from (select customer_id, sum(points) as points, sum(spent) as spent from old_rows group by 1) o
        where t.customer_id = o.customer_id;
      elsif tg_op = 'UPDATE' then
        update tier_metric_totals t set points = t.points + c.points, spent = t.spent + c.spent
        from (select customer_id, sum(points) as points, sum(spent) as spent from (
          select customer_id, points, spent from new_rows
          union all
          select customer_id, -points, -spent from old_rows) u group by 1 order by 1) c
        where t.customer_id = c.customer_id and (c.points <> 0 or c.spent <> 0);
      else
        insert into tier_metric_totals as t (customer_id, points, spent)
        select customer_id, sum(points), sum(spent) from new_rows group by 1 order by 1
        on conflict (customer_id) do update set points = t.points + excluded.points, spent = t.spent + excluded.spent;
      end if;
      return null;
    end $$`.execute(db);
  await sql`create trigger tier_metric_days_totals_insert after insert on tier_metric_days
    referencing new table as new_rows for each statement execute function tier_metric_days_totals()`.execute(db);
  await sql`create trigger tier_metric_days_totals_update after update on tier_metric_days
    referencing old table as old_rows new table as new_rows for each statement execute function tier_metric_days_totals()`.execute(db);
  await sql`create trigger tier_metric_days_totals_delete after delete on tier_metric_days
    referencing old table as old_rows for each statement execute function tier_metric_days_totals()`.execute(db);

  await valuesFunction(sql`
      left join lateral (
        select (select case when metric = 'amount_spent' then s.spent else s.points end from tier_metric_totals s where s.customer_id = c.id)
          - coalesce((select sum(case when metric = 'amount_spent' then d.spent else d.points end)
            from tier_metric_days d where d.customer_id = c.id and d.day > t.today), 0) as v
        where win = 'lifetime'
      ) l on true
      left join lateral (
        select greatest(
          sum(m.v) filter (where (win = 'rolling_days' and d.day > t.today - win_days) or (win = 'calendar_year' and d.day >= t.this_year)),
          sum(m.v) filter (where with_prior and win = 'calendar_year' and d.day < t.this_year)) as v
        from tier_metric_days d
        cross join lateral (select case when metric = 'amount_spent' then d.spent else d.points end as v) m
        where win <> 'lifetime' and d.customer_id = c.id and d.day <= t.today
          and d.day >= case when win = 'rolling_days' then t.today - win_days else (t.this_year - interval '1 year')::date end
      ) w on true`, sql`case when win = 'lifetime' then l.v else w.v end`).execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await valuesFunction(sql`
      left join tier_metric_days d on d.customer_id = c.id and d.day <= t.today
      cross join lateral (select case when metric = 'amount_spent' then d.spent else d.points end as v) m`, sql`greatest(
        sum(m.v) filter (where win = 'lifetime' or (win = 'rolling_days' and d.day > t.today - win_days) or (win = 'calendar_year' and d.day >= t.this_year)),
        sum(m.v) filter (where with_prior and win = 'calendar_year' and d.day >= t.this_year - interval '1 year' and d.day < t.this_year))`, true).execute(db);
  await sql`drop table tier_metric_totals`.execute(db);
  for (const op of ['insert', 'update', 'delete']) await sql`drop trigger ${sql.raw(`tier_metric_days_totals_${op}`)} on tier_metric_days`.execute(db);
  await sql`drop function tier_metric_days_totals()`.execute(db);
}

/** tier_values as migration 011 made it: customers' metrics at `as_of` over the shop's window, from `days` by `value`. */
function valuesFunction(days: ReturnType<typeof sql>, value: ReturnType<typeof sql>, grouped = false) {
  return sql`
    create or replace function tier_values(ids text[], metric text, win text, win_days int, zone text, as_of timestamptz, with_prior boolean)
    returns table (member_id text, metric_value bigint) language sql stable parallel safe as $$
      select c.id, coalesce(${value}, 0)::bigint
      from (select (as_of at time zone zone)::date as today) x
      cross join lateral (select x.today, date_trunc('year', x.today)::date as this_year) t
      cross join unnest(ids) as c(id)
      ${days}
      ${grouped ? sql`group by c.id` : sql``}
    $$`;
}
