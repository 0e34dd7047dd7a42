// Frozen in time: a migration never imports from src/, so later code changes cannot rewrite history.
import { type Kysely, sql } from 'kysely';

/**
 * Issue 35, item 3: staff override a customer's tier until a date. The override is the member's
 * own row: tier_id holds the override's tier (so orders earn by its multiplier with no other read),
 * override_until says until when, and while it is set nothing else moves the tier: the upgrade on
 * earn (below) and the daily evaluation (src/domain/program/tiers.ts) leave the member alone. The
 * due-work kind tier_override_end ends it at override_until, found through the partial index.
 */
export async function up(db: Kysely<any>): Promise<void> {
  await sql`
    alter table tier_members
      add column override_until timestamptz,
      add column override_reason text,
      add column override_at timestamptz`.execute(db);
  await sql`create index tier_members_override_idx on tier_members (override_until) where override_until is not null`.execute(db);

  await upgradeFunction(true).execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await upgradeFunction(false).execute(db);
  await sql`drop index tier_members_override_idx`.execute(db);
  await sql`alter table tier_members drop column override_until, drop column override_reason, drop column override_at`.execute(db);
}

/** tier_upgrade as migration 011 made it; skipOverridden: it leaves alone the members whose tier an override holds. */
function upgradeFunction(skipOverridden: boolean) {
  return sql`
    create or replace function tier_upgrade(ids text[], as_of timestamptz) returns void language plpgsql as $$
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
        where m.customer_id = any(ids) ${sql.raw(skipOverridden ? 'and m.override_until is null' : '')}
      ), raised as (
        update tier_members m set tier_id = t.tier_id, since = as_of
        from target t join tiers n on n.id = t.tier_id left join tiers h on h.id = t.held
        where m.customer_id = t.customer_id and (h.id is null or n.threshold > h.threshold)
        returning m.customer_id, m.shop_id, t.held, t.tier_id
      )
      insert into outbox_events (id, shop_id, type, data)
      select new_event_id(), shop_id, 'tiers/changed', tier_event(customer_id, held, tier_id, 'upgrade') from raised order by customer_id;
    end $$`;
}
