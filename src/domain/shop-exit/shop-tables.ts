import { sql } from 'kysely';

/**
 * Every table that holds a shop's rows, children before their parents (the order a deletion takes;
 * an archive lists them the other way round), the API keys first so the shop's writes stop when its
 * deletion starts. `customer`: reached through its customer (`column`, default customer_id), which
 * the table has an index on and no shop_id or none indexed: a batch is then index probes, never a
 * pass over every shop's rows. Tables whose rows go with a parent's by ON DELETE CASCADE, a bounded few
 * per parent row (a delivery's attempts, a subscription's secrets, a membership's sessions), are
 * not listed. test/shopify-compliance.test.ts holds every shop_id column of the schema against this list.
 */
export const SHOP_TABLES: ReadonlyArray<{ table: string; via: 'shop' } | { table: string; via: 'customer'; column?: string }> = [
  { table: 'api_keys', via: 'shop' },
  { table: 'compliance_requests', via: 'shop' },
  { table: 'shopify_inbox', via: 'shop' },
  { table: 'shopify_orders', via: 'shop' },
  { table: 'shopify_customers', via: 'shop' },
  { table: 'shopify_sync_jobs', via: 'shop' },
  { table: 'shopify_imports', via: 'shop' },
  { table: 'shopify_product_collections', via: 'shop' },
  { table: 'shopify_collection_reconciles', via: 'shop' },
  { table: 'shopify_webhook_registrations', via: 'shop' },
  { table: 'shopify_admin_connections', via: 'shop' },
  { table: 'webhook_deliveries', via: 'shop' },
  { table: 'webhook_subscriptions', via: 'shop' },
  { table: 'outbox_events', via: 'shop' },
  { table: 'idempotency_keys', via: 'shop' },
  { table: 'audit_log', via: 'shop' },
  { table: 'due_work_failures', via: 'shop' },
  { table: 'mail_messages', via: 'shop' },
  { table: 'mail_preferences', via: 'customer' },
  { table: 'mail_suppressions', via: 'shop' },
  { table: 'mail_templates', via: 'shop' },
  { table: 'shop_mail_settings', via: 'shop' },
  { table: 'staff_link_tokens', via: 'shop' },
  { table: 'staff_memberships', via: 'shop' },
  { table: 'shop_timezones', via: 'shop' },
  { table: 'shop_day_runs', via: 'shop' },
  { table: 'expiry_warnings', via: 'customer' },
  { table: 'tier_metric_days', via: 'customer' },
  { table: 'tier_order_points', via: 'customer' },
  { table: 'expiry_timers', via: 'customer' },
  { table: 'tier_members', via: 'shop' },
  { table: 'point_lots', via: 'customer' },
  { table: 'pending_points', via: 'customer' },
  { table: 'rule_awards', via: 'customer' },
  { table: 'customer_access_tokens', via: 'customer' },
  { table: 'discount_codes', via: 'shop' },
  { table: 'points_redemptions', via: 'shop' },
  { table: 'referrals', via: 'customer', column: 'referrer_id' },
  { table: 'referral_codes', via: 'shop' },
  { table: 'orders', via: 'shop' },
  { table: 'activities', via: 'shop' },
  { table: 'tiers', via: 'shop' },
  { table: 'earning_rules', via: 'shop' },
  { table: 'customers', via: 'shop' },
  // Last: deleting the ledger and customers above writes their insight rows.
  { table: 'insight_active_days', via: 'shop' },
  { table: 'insight_buckets', via: 'shop' },
  { table: 'insight_days', via: 'shop' },
  { table: 'insight_rewards', via: 'shop' },
  { table: 'insight_reward_days', via: 'shop' },
];

/** The shop's rows of one listed table, as `t` (its ctid, its columns): every query scoped by the shop. */
export function shopRows(spec: (typeof SHOP_TABLES)[number], shopId: string) {
  const t = sql.table(spec.table);
  return spec.via === 'shop'
    ? sql`${t} t where t.shop_id = ${shopId}`
    : sql`${t} t where ${sql.ref(`t.${spec.column ?? 'customer_id'}`)} in (select c.id from customers c where c.shop_id = ${shopId})`;
}
