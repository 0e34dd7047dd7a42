// Frozen in time: a migration never imports from src/, so later code changes cannot rewrite history.
// An import's ledger entries do not make members active (docs/api.md "Active members"): a balance
// moved in from another program, or set by a customers import, is not the customer's doing here.
// Besides, marking a million imported customers active on the import's day was a fifth of the
// import's database time.
import { type Kysely, sql } from 'kysely';

/** migration 2026_11_27_018's entry day and marker statement, with the rows it marks as `where` says. */
function markActive(where: string) {
  return sql.raw(`
    with marked as (
      insert into insight_active_days as m (day, shop_id, customer_id, bucket)
      select day, shop_id, customer_id, min(bucket)
      from (
        select case when s.timezone_days_from is null or r.created_at >= s.timezone_days_from
            then (r.created_at at time zone s.timezone)::date
            else (select case when r.created_at < p.carried_until then p.carried_day else (r.created_at at time zone p.timezone)::date end
              from shop_timezones p where p.shop_id = r.shop_id and p.since <= r.created_at order by p.since desc limit 1)
          end as day,
          r.shop_id, r.customer_id, date_bin('15 minutes', r.created_at, timestamptz '2000-01-01 00:00:00+00') as bucket
        from new_rows r join shops s on s.id = r.shop_id
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

const replaceTrigger = (db: Kysely<any>, where: string) =>
  sql`
    create or replace function activities_active_members() returns trigger language plpgsql as $$
    begin
      ${markActive(where)};
      return null;
    end $$`.execute(db);

export async function up(db: Kysely<any>): Promise<void> {
  await replaceTrigger(db, `r.type <> 'expire_points' and r.setting_type is distinct from 'import'`);
}

export async function down(db: Kysely<any>): Promise<void> {
  await replaceTrigger(db, `r.type <> 'expire_points'`);
}
