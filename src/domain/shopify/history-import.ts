import { sql, type Updateable } from 'kysely';
import type { DB } from '../../db/database.js';
import type { ShopifyImportRow, ShopifyImportsTable } from '../../db/schema.js';
import { inTransaction } from '../../db/transaction.js';
import { ConflictError, DomainError } from '../kernel/index.js';
import { type BulkObject, customerFromBulk, orderFromBulk } from './bulk-payloads.js';
import { applyImportedCustomer, applyImportedOrder } from './shopify-connector.js';

/**
 * A shop's history brought from Shopify (issue 34, item 5), the domain's part: the import's state,
 * one row per shop (shopify_imports), and applying the bulk operations' lines to it. The phases run
 * customers, then orders, each one bulk operation whose result is applied in file order, a batch
 * per transaction that also moves `lines_applied` on: a run killed anywhere resumes from the line
 * it had reached, and as every apply is the connector's own (keyed by Shopify's ids, older states
 * changing nothing), a line applied twice, or by a webhook too, changes nothing the second time.
 */

export type ImportPhase = 'customers' | 'orders';

export type ShopifyImport = {
  since: Date;
  phase: ImportPhase | 'done';
  bulkOperationId: string | null;
  resultUrl: string | null;
  /** The bulk operation's lines, once it completed (0: nothing to read). */
  objectCount: number | null;
  linesApplied: number;
  customersApplied: number;
  ordersApplied: number;
  /** Orders Shopify has that earn nothing here and were left out (a guest checkout), or that a rule refused. */
  ordersSkipped: number;
  startedAt: Date;
  finishedAt: Date | null;
  /** Why the last run stopped, until a run gets further. */
  error: string | null;
};

const view = (row: ShopifyImportRow): ShopifyImport => ({
  since: row.since,
  phase: row.phase,
  bulkOperationId: row.bulk_operation_id,
  resultUrl: row.result_url,
  objectCount: row.object_count,
  linesApplied: row.lines_applied,
  customersApplied: row.customers_applied,
  ordersApplied: row.orders_applied,
  ordersSkipped: row.orders_skipped,
  startedAt: row.started_at,
  finishedAt: row.finished_at,
  error: row.error,
});

export async function shopifyImportOf(db: DB, shopId: string): Promise<ShopifyImport | null> {
  const row = await db.selectFrom('shopify_imports').selectAll().where('shop_id', '=', shopId).executeTakeFirst();
  return row ? view(row) : null;
}

/**
 * The import to run: the unfinished one of the same `since` (resumed where it stopped), or a new
 * one, which replaces a finished import or one with another `since` (its lines applied stay applied).
 */
export async function beginShopifyImport(db: DB, shopId: string, since: Date, now: Date): Promise<{ state: ShopifyImport; resumed: boolean }> {
  const current = await shopifyImportOf(db, shopId);
  if (current && current.phase !== 'done' && current.since.getTime() === since.getTime()) return { state: current, resumed: true };
  const fresh = { since, phase: 'customers' as const, bulk_operation_id: null, result_url: null, object_count: null, lines_applied: 0, customers_applied: 0, orders_applied: 0, orders_skipped: 0, started_at: now, finished_at: null, error: null };
  const row = await db
    .insertInto('shopify_imports')
    .values({ shop_id: shopId, ...fresh })
    .onConflict((oc) => oc.column('shop_id').doUpdateSet(fresh))
    .returningAll()
    .executeTakeFirstOrThrow();
  return { state: view(row), resumed: false };
}

async function update(db: DB, shopId: string, phase: ImportPhase, changes: Updateable<ShopifyImportsTable>): Promise<ShopifyImport> {
  const row = await db.updateTable('shopify_imports').set(changes).where('shop_id', '=', shopId).where('phase', '=', phase).returningAll().executeTakeFirst();
  if (!row) throw anotherRun();
  return view(row);
}

const anotherRun = () => new ConflictError('shopify_import_running', 'another run of this shop\'s import moved it on meanwhile: run one import per shop at a time');

/** The phase's bulk operation, kept before it is waited for, so a rerun waits for the same one. */
export const recordBulkOperation = (db: DB, shopId: string, phase: ImportPhase, id: string) =>
  update(db, shopId, phase, { bulk_operation_id: id, result_url: null, object_count: null, lines_applied: 0 });

/** The phase's bulk operation completed: where its lines are (null: it found nothing), and how many. */
export const recordBulkResult = (db: DB, shopId: string, phase: ImportPhase, resultUrl: string | null, objectCount: number) =>
  update(db, shopId, phase, { result_url: resultUrl, object_count: objectCount, error: null });

/**
 * The phase starts again with a new bulk operation (the last one failed, or its result is no longer
 * downloadable); what was applied stays applied, and applying it again changes nothing.
 */
export const restartImportPhase = (db: DB, shopId: string, phase: ImportPhase, error: string | null) =>
  update(db, shopId, phase, { bulk_operation_id: null, result_url: null, object_count: null, lines_applied: 0, error });

/** Why a run stopped, for the next one (and the shop) to see. */
export const recordImportError = (db: DB, shopId: string, phase: ImportPhase, error: string) => update(db, shopId, phase, { error });

/** The phase's lines are all applied: orders come next, then the import is done. */
export const finishImportPhase = (db: DB, shopId: string, phase: ImportPhase, now: Date) =>
  update(
    db,
    shopId,
    phase,
    phase === 'customers'
      ? { phase: 'orders', bulk_operation_id: null, result_url: null, object_count: null, lines_applied: 0, error: null }
      : { phase: 'done', finished_at: now, error: null },
  );

/** A top-level object of the bulk output with the children that follow it (grouped output). */
export type BulkGroup = { object: BulkObject; children: BulkObject[] };

/** What a batch did: customers applied, orders applied (created, changed or unchanged) and skipped with their reasons. */
export type BatchOutcome = { customers: number; orders: number; skipped: Array<{ id: string; reason: string }> };

/**
 * Applies a batch of the phase's groups, which start at line `from` and end before line `to`, in
 * one transaction that also moves lines_applied from `from` to `to`: the batch is applied exactly
 * when the position says so. A position that moved meanwhile means another run: refused. An object
 * a rule refuses (a guest checkout's order, bad money) is skipped with its reason, under a savepoint.
 */
export async function applyImportBatch(db: DB, shopId: string, phase: ImportPhase, groups: readonly BulkGroup[], from: number, to: number, now: Date): Promise<BatchOutcome> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await applyBatchOnce(db, shopId, phase, groups, from, to, now);
    } catch (err) {
      // A webhook applying one of the batch's orders or customers meanwhile can deadlock with it: the batch goes again.
      if (!TRANSIENT.has((err as { code?: string }).code ?? '') || attempt >= 3) throw err;
    }
  }
}

/** Deadlock detected, serialization failure. */
const TRANSIENT = new Set(['40P01', '40001']);

function applyBatchOnce(db: DB, shopId: string, phase: ImportPhase, groups: readonly BulkGroup[], from: number, to: number, now: Date): Promise<BatchOutcome> {
  return inTransaction(db, async (trx) => {
    const moved = await trx
      .updateTable('shopify_imports')
      .set({ lines_applied: to })
      .where('shop_id', '=', shopId)
      .where('phase', '=', phase)
      .where('lines_applied', '=', from)
      .returning('shop_id')
      .executeTakeFirst();
    if (!moved) throw anotherRun();
    const outcome: BatchOutcome = { customers: 0, orders: 0, skipped: [] };
    for (const { object, children } of groups) {
      await sql`savepoint import_object`.execute(trx);
      try {
        if (phase === 'customers') {
          await applyImportedCustomer(trx, shopId, customerFromBulk(object));
          outcome.customers++;
        } else {
          const { order, text } = orderFromBulk(object, children);
          await applyImportedOrder(trx, shopId, order, text, now);
          outcome.orders++;
        }
      } catch (err) {
        if (!(err instanceof DomainError)) throw err;
        await sql`rollback to savepoint import_object`.execute(trx);
        outcome.skipped.push({ id: String(object.id), reason: `${err.code}: ${err.message}` });
      }
    }
    await trx
      .updateTable('shopify_imports')
      .set((eb) => ({
        customers_applied: eb('customers_applied', '+', outcome.customers),
        orders_applied: eb('orders_applied', '+', outcome.orders),
        orders_skipped: eb('orders_skipped', '+', phase === 'orders' ? outcome.skipped.length : 0),
        error: null,
      }))
      .where('shop_id', '=', shopId)
      .execute();
    return outcome;
  });
}
