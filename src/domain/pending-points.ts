import { sql } from 'kysely';
import type { PendingPointsRow } from '../db/schema.js';
import type { Queryable, Trx } from '../db/transaction.js';
import { recordEvent } from './events.js';
import { newId } from './ids.js';
import type { Page, PageArgs } from './pagination.js';
import { decodeCursor, encodeCursor, invalidCursor } from './pagination.js';

/**
 * Points an order earned that wait for the shop's pendingDays (returns are still likely): a row
 * per earn, never part of the balance until the scheduler releases it (pending-release.ts). The
 * customer's pending_points is the sum of their unreleased rows, kept in the same transaction.
 */
export type PendingEarn = {
  _id: string;
  customer: string;
  /** Our id of the order that earned them. */
  order: string | null;
  points: number;
  availableAt: Date;
  createdAt: Date;
};

export function toPendingEarn(row: PendingPointsRow): PendingEarn {
  return { _id: row.id, customer: row.customer_id, order: row.order_id, points: row.points, availableAt: row.available_at, createdAt: row.created_at };
}

type Hold = { shopId: string; customerId: string; orderId: string; points: number; availableAt: Date; description: string };

/** Holds `points` until `availableAt`; the caller holds the order's row lock. */
export async function holdPendingPoints(trx: Trx, hold: Hold): Promise<void> {
  const row = await trx
    .insertInto('pending_points')
    .values({ id: newId(), shop_id: hold.shopId, customer_id: hold.customerId, order_id: hold.orderId, points: hold.points, available_at: hold.availableAt })
    .returningAll()
    .executeTakeFirstOrThrow();
  await trx.updateTable('customers').set({ pending_points: sql`pending_points + ${hold.points}` }).where('id', '=', hold.customerId).execute();
  // No `_id`: the balance did not move (points/* events with one name a ledger entry).
  await recordEvent(trx, hold.shopId, 'points/pending', { customer: hold.customerId, order: hold.orderId, points: hold.points, availableAt: hold.availableAt.toISOString(), description: hold.description, pendingEarn: row.id });
}

/**
 * Takes up to `points` back from the order's unreleased pending points, the latest first; returns
 * how many it took. Rows are locked after the order's and before the customer's (the engine's lock order).
 */
export async function takePendingPoints(trx: Trx, take: { orderId: string; customerId: string; points: number }): Promise<number> {
  const rows = await trx
    .selectFrom('pending_points')
    .select(['id', 'points'])
    .where('order_id', '=', take.orderId)
    .where('released_at', 'is', null)
    .where('points', '>', 0)
    .orderBy('available_at', 'desc')
    .orderBy('id', 'desc')
    .forUpdate()
    .execute();
  let taken = 0;
  for (const row of rows) {
    if (taken === take.points) break;
    const part = Math.min(row.points, take.points - taken);
    await trx.updateTable('pending_points').set({ points: row.points - part }).where('id', '=', row.id).execute();
    taken += part;
  }
  if (taken > 0) await trx.updateTable('customers').set({ pending_points: sql`pending_points - ${taken}` }).where('id', '=', take.customerId).execute();
  return taken;
}

/** A customer's pending earns still waiting, soonest available first. */
export async function listPendingEarns(db: Queryable, shopId: string, customerId: string, args: PageArgs): Promise<Page<PendingEarn>> {
  let query = db
    .selectFrom('pending_points')
    .selectAll()
    .where('shop_id', '=', shopId)
    .where('customer_id', '=', customerId)
    .where('released_at', 'is', null)
    .where('points', '>', 0);
  if (args.after) {
    const [at = '', id = ''] = decodeCursor(args.after, 2);
    const after = new Date(at);
    if (Number.isNaN(after.getTime())) throw invalidCursor();
    query = query.where(sql<boolean>`(available_at, id) > (${after}, ${id})`);
  }
  const rows = await query.orderBy('available_at').orderBy('id').limit(args.first + 1).execute();
  const items = rows.slice(0, args.first).map((row) => ({ node: toPendingEarn(row), cursor: encodeCursor([row.available_at.toISOString(), row.id]) }));
  return { items, hasNextPage: rows.length > items.length };
}
