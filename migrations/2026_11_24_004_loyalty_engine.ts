// Frozen in time: a migration never imports from src/, so later code changes cannot rewrite history.
// The loyalty engine (DESIGN.md "Loyalty engine"): shop settings, earning rules, orders, pending
// points, rule awards (sign-up, birthday, custom actions) and the Shopify connector's inbox.
import { type Kysely, sql } from 'kysely';

export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .alterTable('shops')
    .addColumn('currency', 'text', (c) => c.notNull().defaultTo('USD').check(sql`currency ~ '^[A-Z]{3}$'`))
    .addColumn('timezone', 'text', (c) => c.notNull().defaultTo('UTC'))
    .addColumn('pending_days', 'integer', (c) => c.notNull().defaultTo(0).check(sql`pending_days >= 0`))
    // The connector finds a shop by the X-Shopify-Shop-Domain header; its HMAC secret is sealed
    // like webhook signing secrets (we need it in clear to verify, so it cannot be hashed).
    .addColumn('shopify_domain', 'text')
    .addColumn('shopify_webhook_secret', 'text')
    .execute();
  await db.schema.createIndex('shops_shopify_domain_key').unique().on('shops').column('shopify_domain').where(sql.ref('shopify_domain'), 'is not', null).execute();

  // Earned points waiting for the shop's pendingDays; never part of the balance until available.
  await db.schema
    .alterTable('customers')
    .addColumn('pending_points', 'bigint', (c) => c.notNull().defaultTo(0).check(sql`pending_points >= 0`))
    .execute();

  await db.schema
    .createTable('earning_rules')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('shop_id', 'text', (c) => c.notNull().references('shops.id').onDelete('cascade'))
    .addColumn('type', 'text', (c) => c.notNull().check(sql`type in ('place_order', 'sign_up', 'birthday', 'custom')`))
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('active', 'boolean', (c) => c.notNull().defaultTo(true))
    .addColumn('earn_point', 'integer', (c) => c.notNull().check(sql`earn_point > 0`))
    // place_order: earn_point points per `spent_minor` of eligible money (minor units of the shop's currency).
    .addColumn('spent_minor', 'bigint', (c) => c.check(sql`spent_minor > 0`))
    .addColumn('include_product_ids', 'jsonb', (c) => c.notNull().defaultTo(sql`'[]'::jsonb`))
    .addColumn('exclude_product_ids', 'jsonb', (c) => c.notNull().defaultTo(sql`'[]'::jsonb`))
    .addColumn('include_collection_ids', 'jsonb', (c) => c.notNull().defaultTo(sql`'[]'::jsonb`))
    .addColumn('exclude_collection_ids', 'jsonb', (c) => c.notNull().defaultTo(sql`'[]'::jsonb`))
    .addColumn('include_shipping', 'boolean', (c) => c.notNull().defaultTo(false))
    .addColumn('include_tax', 'boolean', (c) => c.notNull().defaultTo(false))
    // custom: the action's name as the shop's backend reports it, and how often it may earn.
    .addColumn('action', 'text')
    .addColumn('action_limit', 'text', (c) => c.check(sql`action_limit in ('once', 'day', 'week', 'unlimited')`))
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('updated_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .execute();
  await db.schema.createIndex('earning_rules_shop_idx').on('earning_rules').columns(['shop_id', 'type']).execute();
  await db.schema.createIndex('earning_rules_action_key').unique().on('earning_rules').columns(['shop_id', 'action']).where(sql.ref('action'), 'is not', null).execute();

  // An order as the shop last sent it (a full state), and what it has earned so far. Keyed like a
  // customer's other lists, (customer, seq), for keyset pages; `id` is ours, `order_id` the shop's.
  await db.schema
    .createTable('orders')
    .addColumn('seq', 'bigint', (c) => c.generatedAlwaysAsIdentity())
    .addColumn('id', 'text', (c) => c.notNull().unique())
    .addColumn('shop_id', 'text', (c) => c.notNull().references('shops.id').onDelete('cascade'))
    .addColumn('customer_id', 'text', (c) => c.notNull().references('customers.id').onDelete('cascade'))
    .addColumn('order_id', 'text', (c) => c.notNull())
    .addColumn('currency', 'text', (c) => c.notNull())
    .addColumn('subtotal_minor', 'bigint', (c) => c.notNull())
    .addColumn('shipping_minor', 'bigint', (c) => c.notNull())
    .addColumn('tax_minor', 'bigint', (c) => c.notNull())
    .addColumn('total_minor', 'bigint', (c) => c.notNull())
    .addColumn('refunded_minor', 'bigint', (c) => c.notNull())
    .addColumn('status', 'text', (c) => c.notNull())
    .addColumn('line_items', 'jsonb', (c) => c.notNull())
    .addColumn('processed_at', 'timestamptz')
    // Shopify's updated_at: an older state arriving after a newer one changes nothing.
    .addColumn('source_updated_at', 'timestamptz')
    // A digest of the state as sent: the same state again is recognised without recomputing.
    .addColumn('state_hash', 'text', (c) => c.notNull())
    // The rules (and multiplier) of the first earn: refunds recompute against it, not today's rules.
    .addColumn('earn_snapshot', 'jsonb')
    .addColumn('earn_note', 'text')
    .addColumn('points_earned', 'bigint', (c) => c.notNull().defaultTo(0))
    .addColumn('points_pending', 'bigint', (c) => c.notNull().defaultTo(0))
    .addColumn('points_clawed_back', 'bigint', (c) => c.notNull().defaultTo(0))
    .addColumn('unrecovered_points', 'bigint', (c) => c.notNull().defaultTo(0))
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('updated_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addPrimaryKeyConstraint('orders_pkey', ['customer_id', 'seq'])
    .addUniqueConstraint('orders_shop_order_key', ['shop_id', 'order_id'])
    .execute();

  // Earned points held until `available_at`; `points` is what is still held (a refund lowers it).
  // The scheduler releases due rows (released_at) into the balance.
  await db.schema
    .createTable('pending_points')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('shop_id', 'text', (c) => c.notNull().references('shops.id').onDelete('cascade'))
    .addColumn('customer_id', 'text', (c) => c.notNull().references('customers.id').onDelete('cascade'))
    .addColumn('order_id', 'text', (c) => c.references('orders.id').onDelete('cascade'))
    .addColumn('points', 'bigint', (c) => c.notNull().check(sql`points >= 0`))
    .addColumn('available_at', 'timestamptz', (c) => c.notNull())
    .addColumn('released_at', 'timestamptz')
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .execute();
  await db.schema.createIndex('pending_points_due_idx').on('pending_points').columns(['available_at', 'id']).where(sql.ref('released_at'), 'is', null).execute();
  await db.schema.createIndex('pending_points_customer_idx').on('pending_points').columns(['customer_id', 'available_at']).execute();
  await db.schema.createIndex('pending_points_order_idx').on('pending_points').column('order_id').where(sql.ref('order_id'), 'is not', null).execute();

  // Earns of the rules that are not orders: sign-up (period 'once'), birthday (the year), custom
  // actions (per their limit). The unique keys make each at most once, whatever races.
  await db.schema
    .createTable('rule_awards')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('shop_id', 'text', (c) => c.notNull().references('shops.id').onDelete('cascade'))
    .addColumn('rule_id', 'text', (c) => c.notNull())
    .addColumn('customer_id', 'text', (c) => c.notNull().references('customers.id').onDelete('cascade'))
    .addColumn('period', 'text')
    .addColumn('reference', 'text')
    .addColumn('points', 'bigint', (c) => c.notNull())
    .addColumn('rule_snapshot', 'jsonb', (c) => c.notNull())
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .execute();
  await db.schema.createIndex('rule_awards_period_key').unique().on('rule_awards').columns(['rule_id', 'customer_id', 'period']).where(sql.ref('period'), 'is not', null).execute();
  await db.schema.createIndex('rule_awards_reference_key').unique().on('rule_awards').columns(['shop_id', 'rule_id', 'reference']).where(sql.ref('reference'), 'is not', null).execute();
  await db.schema.createIndex('rule_awards_customer_idx').on('rule_awards').columns(['customer_id', 'rule_id']).execute();

  // Shopify's webhooks, committed before the 200 and processed after: nothing acknowledged is lost.
  await db.schema
    .createTable('shopify_inbox')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('shop_id', 'text', (c) => c.notNull().references('shops.id').onDelete('cascade'))
    .addColumn('webhook_id', 'text', (c) => c.notNull())
    .addColumn('topic', 'text', (c) => c.notNull())
    .addColumn('body', 'text', (c) => c.notNull())
    .addColumn('received_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('processed_at', 'timestamptz')
    .addColumn('attempts', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('next_attempt_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    // A webhook that cannot be applied (bad payload, unknown currency...) stays visible with its reason.
    .addColumn('error', 'text')
    .addUniqueConstraint('shopify_inbox_webhook_key', ['shop_id', 'webhook_id'])
    .execute();
  await db.schema.createIndex('shopify_inbox_due_idx').on('shopify_inbox').columns(['next_attempt_at', 'id']).where(sql.ref('processed_at'), 'is', null).execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  for (const table of ['shopify_inbox', 'rule_awards', 'pending_points', 'orders', 'earning_rules']) await db.schema.dropTable(table).execute();
  await db.schema.alterTable('customers').dropColumn('pending_points').execute();
  await db.schema.dropIndex('shops_shopify_domain_key').execute();
  await db.schema
    .alterTable('shops')
    .dropColumn('currency')
    .dropColumn('timezone')
    .dropColumn('pending_days')
    .dropColumn('shopify_domain')
    .dropColumn('shopify_webhook_secret')
    .execute();
}
