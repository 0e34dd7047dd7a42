import { sql } from 'kysely';
import type { DB } from '../../db/database.js';
import { inTransaction, type Queryable, type Trx } from '../../db/transaction.js';
import { type Actor, recordAudit } from '../audit/index.js';
import { endCustomerTokens } from '../customers/index.js';
import { type DueWork, NotFoundError, RuleViolationError } from '../kernel/index.js';
import { SHOP_TABLES, shopRows } from './shop-tables.js';

const DAY = 24 * 60 * 60 * 1000;

export type ShopDeletion = { shopId: string; requestedAt: Date; dueAt: Date; reason: string; cancelledAt: Date | null; completedAt: Date | null; rowsDeleted: number };

const toDeletion = (r: { shop_id: string; requested_at: Date; due_at: Date; reason: string; cancelled_at: Date | null; completed_at: Date | null; rows_deleted: string }): ShopDeletion => ({
  shopId: r.shop_id, requestedAt: r.requested_at, dueAt: r.due_at, reason: r.reason, cancelledAt: r.cancelled_at, completedAt: r.completed_at, rowsDeleted: Number(r.rows_deleted),
});

/**
 * Schedules the shop's deletion `graceDays` from now (issue 37, item 5; the SHOP_DELETION_GRACE_DAYS setting). A second request while one
 * waits keeps the earlier due time (a request never postpones one); after a cancellation it starts a
 * new grace. The shop keeps working meanwhile: its keys, its program, its export.
 */
export function requestShopDeletion(db: DB, shopId: string, options: { reason: string; graceDays: number }, actor?: Actor, now = new Date()): Promise<ShopDeletion> {
  return inTransaction(db, (trx) => scheduleShopDeletion(trx, shopId, options, actor, now));
}

/** requestShopDeletion inside a transaction of the caller's (Shopify's shop/redact, recorded with it). */
export async function scheduleShopDeletion(trx: Trx, shopId: string, options: { reason: string; graceDays: number }, actor?: Actor, now = new Date()): Promise<ShopDeletion> {
  const shop = await trx.selectFrom('shops').select('id').where('id', '=', shopId).executeTakeFirst();
  if (!shop) throw new NotFoundError('shop_not_found', `no shop with id ${shopId}`, ['shop']);
  const dueAt = new Date(now.getTime() + options.graceDays * DAY);
  const row = await trx
    .insertInto('shop_deletions')
    .values({ shop_id: shopId, requested_at: now, due_at: dueAt, reason: options.reason })
    .onConflict((oc) =>
      oc.column('shop_id').doUpdateSet({
        requested_at: sql`case when shop_deletions.cancelled_at is null then shop_deletions.requested_at else excluded.requested_at end`,
        due_at: sql`case when shop_deletions.cancelled_at is null then least(shop_deletions.due_at, excluded.due_at) else excluded.due_at end`,
        reason: sql`case when shop_deletions.cancelled_at is null then shop_deletions.reason else excluded.reason end`,
        cancelled_at: null,
      }),
    )
    .returningAll()
    .executeTakeFirstOrThrow();
  const deletion = toDeletion(row);
  await recordAudit(trx, shopId, actor, { kind: 'shop.deletionRequest', subject: { type: 'shop', id: shopId }, after: { dueAt: deletion.dueAt } }, now);
  return deletion;
}

/** Cancels a deletion still in its grace; one already started (or done) cannot be. */
export async function cancelShopDeletion(db: DB, shopId: string, actor?: Actor, now = new Date()): Promise<ShopDeletion> {
  return inTransaction(db, async (trx) => {
    // Waits for a batch in progress: its lock is held for the batch's transaction.
    const row = await trx.selectFrom('shop_deletions').selectAll().where('shop_id', '=', shopId).forUpdate().executeTakeFirst();
    if (!row || row.cancelled_at) throw new NotFoundError('shop_deletion_not_found', `shop ${shopId} has no deletion waiting`, ['shop']);
    if (row.completed_at || row.due_at <= now) throw new RuleViolationError('shop_deletion_started', `the deletion of shop ${shopId} began at ${row.due_at.toISOString()}; it cannot be cancelled`, ['shop']);
    const cancelled = toDeletion(await trx.updateTable('shop_deletions').set({ cancelled_at: now }).where('shop_id', '=', shopId).returningAll().executeTakeFirstOrThrow());
    await recordAudit(trx, shopId, actor, { kind: 'shop.deletionCancel', subject: { type: 'shop', id: shopId }, before: { dueAt: cancelled.dueAt } }, now);
    return cancelled;
  });
}

export async function shopDeletionOf(db: Queryable, shopId: string): Promise<ShopDeletion | null> {
  const row = await db.selectFrom('shop_deletions').selectAll().where('shop_id', '=', shopId).executeTakeFirst();
  return row ? toDeletion(row) : null;
}

/** Deletions past their grace, not cancelled, not done: the scheduler's probe (a partial index). */
const due = (db: Queryable, now: Date) =>
  db.selectFrom('shop_deletions').where('due_at', '<=', now).where('cancelled_at', 'is', null).where('completed_at', 'is', null);

/**
 * Due deletions, done by the one scheduler: each call claims one (SKIP LOCKED: one instance at a
 * time) and deletes up to `limit` of its rows, table after table, children first, in one short
 * transaction; the scheduler calls again while calls come back full. When no table holds a row
 * of the shop any more, the shop's row goes and the deletion is marked done in the same
 * transaction: exactly once, and a restart mid-way carries on where the last commit left it.
 */
export const shopDeletion: DueWork = {
  name: 'shop_deletion',
  runDue: (db: DB, now: Date, limit: number) =>
    inTransaction(db, async (trx) => {
      const job = await due(trx, now).select(['shop_id', 'next_table']).orderBy('due_at').limit(1).forUpdate().skipLocked().executeTakeFirst();
      if (!job) return 0;
      let { deleted, nextTable } = await deleteBatch(trx, job.shop_id, job.next_table, limit);
      const finished = nextTable === SHOP_TABLES.length && (await deleteShopRow(trx, job.shop_id));
      // Rows written meanwhile to a table already emptied keep the shop's row: sweep them all again.
      if (nextTable === SHOP_TABLES.length && !finished) nextTable = 0;
      await trx
        .updateTable('shop_deletions')
        .set({ rows_deleted: sql`rows_deleted + ${deleted + (finished ? 1 : 0)}`, next_table: nextTable, ...(finished ? { completed_at: now } : {}) })
        .where('shop_id', '=', job.shop_id)
        .execute();
      // A finished shop counts as work done, so the scheduler looks for the next one.
      return finished ? Math.max(deleted, 1) : deleted;
    }),
  async oldestDue(db: DB, now: Date): Promise<Date | null> {
    const row = await due(db, now).select('due_at').orderBy('due_at').limit(1).executeTakeFirst();
    return row?.due_at ?? null;
  },
};

/**
 * Deletes up to `limit` of the shop's rows, from table `from` of SHOP_TABLES on; returns how many,
 * and the first table that may still hold some (SHOP_TABLES.length: none does, unless written meanwhile).
 */
async function deleteBatch(trx: Trx, shopId: string, from: number, limit: number): Promise<{ deleted: number; nextTable: number }> {
  let deleted = 0;
  for (let i = from; i < SHOP_TABLES.length; i++) {
    const spec = SHOP_TABLES[i]!;
    const t = sql.table(spec.table);
    const want = limit - deleted;
    // By ctid: every table, whatever its key, one index-scoped pick and a TID scan.
    const result = await sql`delete from ${t} where ctid = any(array(select t.ctid from ${shopRows(spec, shopId)} limit ${want}))`.execute(trx);
    const n = Number(result.numAffectedRows ?? 0);
    // Tokens are trusted from each instance's cache for a while: they end with their rows, not after it.
    if (n > 0 && spec.table === 'customer_access_tokens') endCustomerTokens(trx, { shopId });
    deleted += n;
    if (n === want) return { deleted, nextTable: i };
  }
  return { deleted, nextTable: SHOP_TABLES.length };
}

/** The shop's own row, unless a row written since its table was emptied still refers to it (then false). */
async function deleteShopRow(trx: Trx, shopId: string): Promise<boolean> {
  await sql`savepoint shop_row`.execute(trx);
  try {
    await trx.deleteFrom('shops').where('id', '=', shopId).execute();
    return true;
  } catch (err) {
    if ((err as { code?: unknown }).code !== '23503') throw err;
    await sql`rollback to savepoint shop_row`.execute(trx);
    return false;
  }
}
