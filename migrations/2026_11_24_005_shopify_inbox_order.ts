// Frozen in time: a migration never imports from src/, so later code changes cannot rewrite history.
import type { Kysely } from 'kysely';

export async function up(db: Kysely<any>): Promise<void> {
  // The Shopify order a webhook is about: refunds/create carries the refund alone, so an order's
  // state is rebuilt from all its webhooks, found by this column.
  await db.schema.alterTable('shopify_inbox').addColumn('shopify_order_id', 'text').execute();
  await db.schema.createIndex('shopify_inbox_order_idx').on('shopify_inbox').columns(['shop_id', 'shopify_order_id']).execute();
  // The shop's list of received webhooks, newest first.
  await db.schema.createIndex('shopify_inbox_shop_received_idx').on('shopify_inbox').columns(['shop_id', 'received_at desc', 'id desc']).execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropIndex('shopify_inbox_shop_received_idx').execute();
  await db.schema.dropIndex('shopify_inbox_order_idx').execute();
  await db.schema.alterTable('shopify_inbox').dropColumn('shopify_order_id').execute();
}
