// Frozen in time: a migration never imports from src/, so later code changes cannot rewrite history.
import { type Kysely, sql } from 'kysely';

export async function up(db: Kysely<any>): Promise<void> {
  // The Shopify order a webhook is about, as the shop's list of webhooks shows it.
  await db.schema.alterTable('shopify_inbox').addColumn('shopify_order_id', 'text').execute();
  // The shop's list of received webhooks, newest first.
  await db.schema.createIndex('shopify_inbox_shop_received_idx').on('shopify_inbox').columns(['shop_id', 'received_at desc', 'id desc']).execute();
  // The retention purge walks what was processed, oldest first.
  await db.schema.createIndex('shopify_inbox_processed_idx').on('shopify_inbox').columns(['processed_at', 'id']).where(sql.ref('processed_at'), 'is not', null).execute();

  // What Shopify has said of each order: its latest body (by Shopify's updated_at) and every refund
  // by id. refunds/create carries the refund alone, and webhooks come in any order, so the order's
  // state is rebuilt from these facts; the inbox rows can then go.
  await db.schema
    .createTable('shopify_orders')
    .addColumn('shop_id', 'text', (c) => c.notNull().references('shops.id').onDelete('cascade'))
    .addColumn('shopify_order_id', 'text', (c) => c.notNull())
    .addColumn('order_body', 'jsonb')
    .addColumn('refunds', 'jsonb', (c) => c.notNull().defaultTo(sql`'{}'::jsonb`))
    .addPrimaryKeyConstraint('shopify_orders_pkey', ['shop_id', 'shopify_order_id'])
    .execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropTable('shopify_orders').execute();
  await db.schema.dropIndex('shopify_inbox_processed_idx').execute();
  await db.schema.dropIndex('shopify_inbox_shop_received_idx').execute();
  await db.schema.alterTable('shopify_inbox').dropColumn('shopify_order_id').execute();
}
