// Frozen in time: a migration never imports from src/, so later code changes cannot rewrite history.
// Shopify's own payloads (issue 31): gift cards and test orders that earn only when the shop says
// so, a sign-up bonus only for customers who signed up after the program started, customers'
// states in Shopify's order, and refunds that wait for their order.
import { type Kysely, sql } from 'kysely';

export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .alterTable('shops')
    // Test orders (Shopify's `test`) earn only with this on.
    .addColumn('earn_on_test_orders', 'boolean', (c) => c.notNull().defaultTo(false))
    // The sign-up bonus goes to customers who signed up at or after this; null: since the Shopify connection.
    .addColumn('sign_up_bonus_since', 'timestamptz')
    // When the shop first connected its Shopify store (kept when the connection is changed).
    .addColumn('shopify_connected_at', 'timestamptz')
    .execute();
  // Shops connected before this column: the first webhook still kept is the earliest sign of the
  // connection (the inbox keeps a week), or now.
  await sql`
    update shops s set shopify_connected_at = coalesce((select min(i.received_at) from shopify_inbox i where i.shop_id = s.id), now())
    where s.shopify_domain is not null`.execute(db);

  await db.schema.alterTable('orders').addColumn('test', 'boolean', (c) => c.notNull().defaultTo(false)).execute();
  await db.schema.alterTable('earning_rules').addColumn('include_gift_cards', 'boolean', (c) => c.notNull().defaultTo(false)).execute();

  // A refund that came before its order: stored, waiting, and shown as applied once its order is.
  await db.schema.alterTable('shopify_inbox').addColumn('awaits_order', 'boolean', (c) => c.notNull().defaultTo(false)).execute();
  await db.schema
    .createIndex('shopify_inbox_awaits_order_idx')
    .on('shopify_inbox')
    .columns(['shop_id', 'shopify_order_id'])
    .where(sql.ref('awaits_order'), '=', true)
    .execute();

  // The latest state of each Shopify customer applied (Shopify's updated_at): an older one changes nothing.
  await db.schema
    .createTable('shopify_customers')
    .addColumn('shop_id', 'text', (c) => c.notNull().references('shops.id').onDelete('cascade'))
    .addColumn('shopify_customer_id', 'text', (c) => c.notNull())
    .addColumn('updated_at', 'timestamptz', (c) => c.notNull())
    .addPrimaryKeyConstraint('shopify_customers_pkey', ['shop_id', 'shopify_customer_id'])
    .execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropTable('shopify_customers').execute();
  await db.schema.dropIndex('shopify_inbox_awaits_order_idx').execute();
  await db.schema.alterTable('shopify_inbox').dropColumn('awaits_order').execute();
  await db.schema.alterTable('earning_rules').dropColumn('include_gift_cards').execute();
  await db.schema.alterTable('orders').dropColumn('test').execute();
  await db.schema.alterTable('shops').dropColumn('shopify_connected_at').dropColumn('sign_up_bonus_since').dropColumn('earn_on_test_orders').execute();
}
