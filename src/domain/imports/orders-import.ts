import type { DB } from '../../db/database.js';
import { inTransaction } from '../../db/transaction.js';
import { DomainError } from '../kernel/index.js';
import { upsertOrder } from '../orders/index.js';
import { ensureOrderCustomer, orderPut, parseShopifyOrder, type ShopifyOrder } from '../shopify/index.js';
import { DEFAULT_REPORT_LIMIT, type ImportRecord, type ImportRejection } from './customers-import.js';

export type OrdersImportResult = {
  /** Good lines: created + updated + unchanged. */
  imported: number;
  created: number;
  updated: number;
  /** The state the order already had (a re-run of the same file). */
  unchanged: number;
  /** The first `reportLimit` refused lines, in line order. */
  rejected: ImportRejection[];
  rejectedCount: number;
};

/**
 * Orders in flight at once: they meet in upsertOrder's group commit, which writes up to 64 in one
 * transaction, two transactions at a time; many in flight keep those batches full.
 */
export const ORDER_IMPORT_CONCURRENCY = 128;
/** Connections the import needs: the group commit's two transactions, and one spare. */
export const ORDER_IMPORT_POOL_SIZE = 3;

/**
 * Orders from a file of history, each through the same upsertOrder as PUT /orders (so the same
 * rules, refunds and pending points apply, and a re-run changes nothing). A line is our own format
 * (PUT /orders' body and its `orderId`) or Shopify's Order, as its webhooks send it or wrapped as
 * the Admin API answers (`{"order": …}`): mapped as the Shopify connector maps it, its customer
 * created from the order when the shop does not know them yet. Lines of one order are applied in
 * file order (its states move forward); different orders run `concurrency` at a time. A refused
 * line is reported with its reason and the rest goes on. Memory holds the orders in flight only.
 */
export async function importOrders(
  db: DB,
  shopId: string,
  records: AsyncIterable<ImportRecord>,
  options: { concurrency?: number; reportLimit?: number; onProgress?: (read: number) => void } = {},
): Promise<OrdersImportResult> {
  const concurrency = options.concurrency ?? ORDER_IMPORT_CONCURRENCY;
  const reportLimit = options.reportLimit ?? DEFAULT_REPORT_LIMIT;
  const result: OrdersImportResult = { imported: 0, created: 0, updated: 0, unchanged: 0, rejected: [], rejectedCount: 0 };
  const reject = (line: number, error: string) => {
    result.rejectedCount++;
    if (result.rejected.length < reportLimit) result.rejected.push({ line, error });
  };
  // The last write of each order in flight, so the next line of the same order waits for it.
  const tails = new Map<string, Promise<void>>();
  const inFlight = new Set<Promise<void>>();
  let read = 0;

  // A Shopify customer being created, so the lines of one new customer in flight create them once.
  const creating = new Map<string, Promise<void>>();
  const ensureCustomer = (order: ShopifyOrder): Promise<void> => {
    const key = order.customer?.id;
    if (key === undefined) return Promise.resolve();
    let ensured = creating.get(key);
    if (!ensured) {
      ensured = inTransaction(db, (trx) => ensureOrderCustomer(trx, shopId, order)).finally(() => creating.delete(key));
      creating.set(key, ensured);
    }
    return ensured;
  };

  const apply = async (line: number, orderId: string, body: Record<string, unknown>, shopifyOrder?: ShopifyOrder) => {
    try {
      if (shopifyOrder) await ensureCustomer(shopifyOrder);
      const { created, changed } = await upsertOrder(db, shopId, orderId, body);
      result.imported++;
      if (created) result.created++;
      else if (changed) result.updated++;
      else result.unchanged++;
    } catch (err) {
      if (!(err instanceof DomainError)) throw err;
      reject(line, err.message);
    }
  };

  for await (const record of records) {
    read++;
    options.onProgress?.(read);
    if ('error' in record) {
      reject(record.line, record.error);
      continue;
    }
    const value = record.value as Record<string, unknown> | null;
    if (value === null || typeof value !== 'object' || Array.isArray(value)) {
      reject(record.line, 'orderId: required (the shop\'s own order id, a string)');
      continue;
    }
    let put: { orderId: string; body: Record<string, unknown>; shopifyOrder?: ShopifyOrder };
    const shopify = shopifyOrderIn(value);
    if (shopify !== undefined) {
      try {
        const shopifyOrder = parseShopifyOrder(shopify);
        put = { ...orderPut(shopifyOrder, []), shopifyOrder };
      } catch (err) {
        if (!(err instanceof DomainError)) throw err;
        reject(record.line, err.message);
        continue;
      }
    } else if (typeof value.orderId === 'string' && value.orderId.trim() !== '') {
      const { orderId, ...body } = value as { orderId: string } & Record<string, unknown>;
      put = { orderId, body };
    } else {
      reject(record.line, 'orderId: required (the shop\'s own order id, a string), or a Shopify order (its line_items)');
      continue;
    }
    const { orderId, body, shopifyOrder } = put;
    const previous = tails.get(orderId) ?? Promise.resolve();
    const write: Promise<void> = previous.then(() => apply(record.line, orderId, body, shopifyOrder));
    tails.set(orderId, write);
    inFlight.add(write);
    const done = () => {
      inFlight.delete(write);
      if (tails.get(orderId) === write) tails.delete(orderId);
    };
    // Cleanup either way; a failure itself surfaces through the race and the final wait.
    void write.then(done, done);
    if (inFlight.size >= concurrency) await Promise.race(inFlight);
  }
  await Promise.all(inFlight);
  result.rejected.sort((a, b) => a.line - b.line);
  return result;
}

/**
 * The Shopify order a line holds, if it is one: an Order as webhooks send it (Shopify's
 * `line_items`, no `orderId` of ours), or the Admin API's `{"order": …}`.
 */
function shopifyOrderIn(value: Record<string, unknown>): unknown {
  if ('orderId' in value) return undefined;
  if (Object.keys(value).length === 1 && typeof value.order === 'object' && value.order !== null) return value.order;
  return 'line_items' in value ? value : undefined;
}
