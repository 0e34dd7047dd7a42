// Frozen in time: a migration never imports from src/, so later code changes cannot rewrite history.
import { type Kysely, sql } from 'kysely';

/**
 * Issue 34, item 4: which collections each product of a connected store is in, read from the
 * Admin API, so earning rules' collection lists work for the connector's orders (Shopify's order
 * webhooks name products, never collections).
 * - shopify_product_collections: one row per product the service has read (Shopify's ids are
 *   text: they pass 2^53); a product known to be in no collection has `[]`, which is not the same
 *   as no row (not read yet). refreshed_at: when Shopify last said so; a reconcile pass deletes
 *   what it did not see (products deleted in Shopify) by it.
 * - shopify_collection_reconciles: where a shop's reconcile pass is (it reads the catalogue a page
 *   per job run), when it began, when the last one ended, and whether a collection changed during
 *   the pass (then another pass follows at once).
 */
export async function up(db: Kysely<any>): Promise<void> {
  await sql`
    create table shopify_product_collections (
      shop_id text not null references shops (id) on delete cascade,
      product_id text not null,
      collection_ids jsonb not null default '[]',
      refreshed_at timestamptz not null,
      primary key (shop_id, product_id)
    )`.execute(db);
  // The end of a pass deletes the shop's rows it did not refresh.
  await sql`create index shopify_product_collections_refreshed_idx on shopify_product_collections (shop_id, refreshed_at)`.execute(db);
  await sql`
    create table shopify_collection_reconciles (
      shop_id text primary key references shops (id) on delete cascade,
      cursor text,
      started_at timestamptz,
      finished_at timestamptz,
      again boolean not null default false
    )`.execute(db);
  // Stores connected before this: their first pass is due now (ids in the form of the service's own, 24 hex digits).
  await sql`
    insert into shopify_sync_jobs (id, shop_id, kind, subject)
    select substr(md5(random()::text || clock_timestamp()::text || shop_id), 1, 24), shop_id, 'collections_reconcile', ''
    from shopify_admin_connections
    on conflict (shop_id, kind, subject) do nothing`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`delete from shopify_sync_jobs where kind in ('collections_reconcile', 'product_collections')`.execute(db);
  await sql`drop table shopify_collection_reconciles`.execute(db);
  await sql`drop table shopify_product_collections`.execute(db);
}
