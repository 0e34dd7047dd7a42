import { sql } from 'kysely';
import type { DB } from '../../db/database.js';
import { inTransaction, type Queryable, type Trx } from '../../db/transaction.js';
import { enqueueSyncJobs, ensureSyncJob, rescheduleSyncJob, type SyncJob } from './sync-jobs.js';

/**
 * Which collections a connected store's products are in (issue 34, item 4): Shopify's order
 * webhooks name products, never collections, so an earning rule's collection lists could not match
 * a connector order without this. Read from the Admin API by the sync worker and kept fresh: a
 * reconcile of the whole catalogue when the store connects and every day after; a product's own
 * read when products/create or products/update says it changed, or an order names one not read
 * yet; another pass for collections/update; and, with nothing to ask, products/delete (in no
 * collection) and collections/delete (taken off every product here).
 */

/** A reconcile pass starts this long after the last one ended. */
export const COLLECTIONS_RECONCILE_EVERY_MS = 24 * 60 * 60 * 1000;
/**
 * How long a connector order waits for its products' collections when a read of them is queued:
 * normally a second or two; longer only when the store is throttled or failing, and then the
 * order earns by what is known rather than not at all (docs/api.md, "Collections for rules").
 */
export const ORDER_WAITS_FOR_COLLECTIONS_MS = 10 * 60 * 1000;
/** An order line keeps at most this many collection ids (the orders' own limit). */
const LINE_COLLECTIONS_MAX = 100;

/** The numeric id at the end of a gid (`gid://shopify/Collection/841564295` → `841564295`): the form order webhooks use for products, and rules for collections. */
export const legacyId = (gid: string) => gid.slice(gid.lastIndexOf('/') + 1);

export type ProductCollections = { productId: string; collectionIds: string[] };

/** Records what Shopify said of some products now (their rows replaced whole). */
export async function recordProductCollections(db: Queryable, shopId: string, products: readonly ProductCollections[], at: Date): Promise<void> {
  if (!products.length) return;
  await db
    .insertInto('shopify_product_collections')
    .values(products.map((p) => ({ shop_id: shopId, product_id: p.productId, collection_ids: JSON.stringify([...new Set(p.collectionIds)].sort()), refreshed_at: at })))
    .onConflict((oc) => oc.columns(['shop_id', 'product_id']).doUpdateSet({ collection_ids: (eb) => eb.ref('excluded.collection_ids'), refreshed_at: (eb) => eb.ref('excluded.refreshed_at') }))
    .execute();
}

/** The collections known for each of `productIds` (a product not read yet is absent). */
export async function knownCollections(db: Queryable, shopId: string, productIds: readonly string[]): Promise<Map<string, string[]>> {
  if (!productIds.length) return new Map();
  const rows = await db
    .selectFrom('shopify_product_collections')
    .select(['product_id', 'collection_ids'])
    .where('shop_id', '=', shopId)
    .where('product_id', 'in', [...new Set(productIds)])
    .execute();
  return new Map(rows.map((r) => [r.product_id, r.collection_ids.slice(0, LINE_COLLECTIONS_MAX)]));
}

/**
 * The collections an order's products are in, or the products it must wait for: with the Admin
 * API connected, a product not read yet, or whose read is queued (a products/update said it
 * changed), holds the order back (its read queued if it was not), so that a rule excluding a
 * collection does not pay for a line in it just because the order came first. Not connected, or
 * after ORDER_WAITS_FOR_COLLECTIONS_MS, or once the read failed for good, it earns by what is known.
 */
export async function collectionsForOrder(
  trx: Trx,
  shopId: string,
  productIds: readonly string[],
  receivedAt: Date,
  now: Date,
): Promise<{ collections: Map<string, string[]>; waitFor: string[] }> {
  const collections = await knownCollections(trx, shopId, productIds);
  if (!productIds.length || now.getTime() - receivedAt.getTime() >= ORDER_WAITS_FOR_COLLECTIONS_MS) return { collections, waitFor: [] };
  if (!(await adminConnected(trx, shopId))) return { collections, waitFor: [] };
  const jobs = await trx
    .selectFrom('shopify_sync_jobs')
    .select(['subject', 'failed_at'])
    .where('shop_id', '=', shopId)
    .where('kind', '=', 'product_collections')
    .where('subject', 'in', [...new Set(productIds)])
    .execute();
  const job = new Map(jobs.map((j) => [j.subject, j.failed_at]));
  const waitFor: string[] = [];
  for (const productId of new Set(productIds)) {
    if (job.get(productId) === null) waitFor.push(productId);
    else if (!collections.has(productId) && !job.has(productId)) {
      await ensureSyncJob(trx, shopId, 'product_collections', productId);
      waitFor.push(productId);
    }
  }
  return { collections, waitFor };
}

/** Whether the shop's Admin API is connected: without it nothing is read, and nothing waits for a read. */
export async function adminConnected(db: Queryable, shopId: string): Promise<boolean> {
  return (await db.selectFrom('shopify_admin_connections').select('shop_id').where('shop_id', '=', shopId).executeTakeFirst()) !== undefined;
}

/** products/create, products/update: the product's collections are read again (and orders for it wait for that). */
export const refreshProductCollections = (trx: Trx, shopId: string, productId: string) => enqueueSyncJobs(trx, [{ shopId, kind: 'product_collections', subject: productId }]);

/** products/delete: a product that is gone is in no collection. */
export const forgetProduct = (trx: Trx, shopId: string, productId: string, at: Date) => recordProductCollections(trx, shopId, [{ productId, collectionIds: [] }], at);

/** collections/delete: the collection is taken off every product of the shop (a pass over the shop's rows: collections are rarely deleted). */
export async function forgetCollection(trx: Trx, shopId: string, collectionId: string): Promise<void> {
  await trx
    .updateTable('shopify_product_collections')
    .set({ collection_ids: sql`collection_ids - ${collectionId}::text` })
    .where('shop_id', '=', shopId)
    .where(sql<boolean>`collection_ids ? ${collectionId}::text`)
    .execute();
}

/** Connecting: a pass from the first page, now (the store may not be the one read before). */
export async function startCollectionsReconcile(trx: Trx, shopId: string, now = new Date()): Promise<void> {
  const fresh = { cursor: null, started_at: null, again: false };
  await trx.insertInto('shopify_collection_reconciles').values({ shop_id: shopId, ...fresh }).onConflict((oc) => oc.column('shop_id').doUpdateSet(fresh)).execute();
  await enqueueSyncJobs(trx, [{ shopId, kind: 'collections_reconcile', subject: '' }], now);
}

/**
 * collections/update, whose body does not say which products a smart collection's new rules took
 * in or left out: a pass now. One under way is not restarted (a busy store would never finish
 * one): another follows it at once.
 */
export async function requestCollectionsReconcile(trx: Trx, shopId: string, now = new Date()): Promise<void> {
  const row = await trx
    .insertInto('shopify_collection_reconciles')
    .values({ shop_id: shopId })
    .onConflict((oc) => oc.column('shop_id').doUpdateSet({ again: sql<boolean>`shopify_collection_reconciles.started_at is not null` }))
    .returning('again')
    .executeTakeFirstOrThrow();
  if (row.again) await ensureSyncJob(trx, shopId, 'collections_reconcile', '', now);
  else await enqueueSyncJobs(trx, [{ shopId, kind: 'collections_reconcile', subject: '' }], now);
}

/** Where the shop's pass is: the cursor of the next page (null: the first) and when the pass began. */
export async function reconcilePosition(db: Queryable, shopId: string, now: Date): Promise<{ cursor: string | null; startedAt: Date }> {
  const row = await db
    .insertInto('shopify_collection_reconciles')
    .values({ shop_id: shopId, started_at: now })
    .onConflict((oc) => oc.column('shop_id').doUpdateSet({ started_at: sql<Date>`coalesce(shopify_collection_reconciles.started_at, excluded.started_at)` }))
    .returning(['cursor', 'started_at'])
    .executeTakeFirstOrThrow();
  return { cursor: row.cursor, startedAt: row.started_at! };
}

/**
 * Keeps one page of a pass (`next`: the cursor after it, null at the end; `incomplete`: products
 * whose collections did not fit in the page) and makes the job due again, in one transaction: at
 * once for the next page; at the end, after a day, or at once when a collection changed during
 * the pass, and products the pass did not see (deleted in Shopify) go. Returns the due time.
 */
export function recordReconcilePage(
  db: DB,
  job: SyncJob,
  page: { products: readonly ProductCollections[]; incomplete: readonly string[]; next: string | null },
  startedAt: Date,
  now: Date,
): Promise<Date> {
  const { products, incomplete, next } = page;
  const shopId = job.shop_id;
  return inTransaction(db, async (trx) => {
    await recordProductCollections(trx, shopId, products, now);
    // In more collections than a page lists: their own read goes on (orders for them wait for it).
    for (const productId of incomplete) await ensureSyncJob(trx, shopId, 'product_collections', productId, now);
    let due = now;
    if (next !== null) {
      await trx.updateTable('shopify_collection_reconciles').set({ cursor: next }).where('shop_id', '=', shopId).execute();
    } else {
      await trx.deleteFrom('shopify_product_collections').where('shop_id', '=', shopId).where('refreshed_at', '<', startedAt).execute();
      const state = await trx.selectFrom('shopify_collection_reconciles').select('again').where('shop_id', '=', shopId).forUpdate().executeTakeFirst();
      await trx.updateTable('shopify_collection_reconciles').set({ cursor: null, started_at: null, finished_at: now, again: false }).where('shop_id', '=', shopId).execute();
      if (!state?.again) due = new Date(now.getTime() + COLLECTIONS_RECONCILE_EVERY_MS);
    }
    // With the page, so a crash cannot keep the page and lose where the pass is.
    await rescheduleSyncJob(trx, job, due);
    return due;
  });
}

/** What the shop's store has told of its catalogue, for the connection's view. */
export async function collectionsSyncState(db: Queryable, shopId: string): Promise<{ products: number; reconciledAt: Date | null }> {
  const [count, reconcile] = await Promise.all([
    db.selectFrom('shopify_product_collections').select((eb) => eb.fn.countAll<string>().as('n')).where('shop_id', '=', shopId).executeTakeFirstOrThrow(),
    db.selectFrom('shopify_collection_reconciles').select('finished_at').where('shop_id', '=', shopId).executeTakeFirst(),
  ]);
  return { products: Number(count.n), reconciledAt: reconcile?.finished_at ?? null };
}

/** Disconnecting: what was read of the store is not kept fresh any more, so it goes. */
export async function forgetStoreCatalogue(trx: Trx, shopId: string): Promise<void> {
  await trx.deleteFrom('shopify_product_collections').where('shop_id', '=', shopId).execute();
  await trx.deleteFrom('shopify_collection_reconciles').where('shop_id', '=', shopId).execute();
}
