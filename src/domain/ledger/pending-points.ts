import { sql } from 'kysely';
import type { PendingPointsRow } from '../../db/schema.js';
import type { Queryable, Trx } from '../../db/transaction.js';
import { decodeCursor, encodeCursor, invalidCursor, newId, type Page, type PageArgs, type ShopEvent } from '../kernel/index.js';

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

export type Hold = { shopId: string; customerId: string; orderId: string; points: number; availableAt: Date; description: string };

/**
 * Writes an order batch's pending points: holds each hold's points until its `availableAt`, and
 * lowers the customers' pending_points by what `takePendingPoints` took back, in one statement
 * however many there are. The caller holds the orders' and the customers' row locks, and records
 * the `points/pending` events returned with the batch's others.
 */
export async function writePendingPoints(trx: Trx, holds: Hold[], taken: ReadonlyArray<{ customerId: string; points: number }>): Promise<ShopEvent[]> {
  if (holds.length === 0 && taken.length === 0) return [];
  const ids = holds.map(() => newId());
  const column = <V>(pick: (h: Hold) => V) => holds.map(pick);
  const changed = [...holds.map((h) => ({ customerId: h.customerId, points: h.points })), ...taken.map((t) => ({ customerId: t.customerId, points: -t.points }))];
  await sql`
    with held as (
      insert into pending_points (id, shop_id, customer_id, order_id, points, available_at)
      select * from unnest(${ids}::text[], ${column((h) => h.shopId)}::text[], ${column((h) => h.customerId)}::text[],
        ${column((h) => h.orderId)}::text[], ${column((h) => h.points)}::int[], ${column((h) => h.availableAt.toISOString())}::timestamptz[])
    )
    update customers c set pending_points = c.pending_points + t.points
    from (select customer_id, sum(points)::int as points
      from unnest(${changed.map((c) => c.customerId)}::text[], ${changed.map((c) => c.points)}::int[]) as i(customer_id, points)
      group by customer_id) t
    where c.id = t.customer_id`.execute(trx);
  return holds.map((h, i) => pendingEvent(h, ids[i]!));
}

/** The `points/pending` event of the hold written as pending earn `id`. */
export function pendingEvent(hold: Hold, id: string): ShopEvent {
  // No `_id`: the balance did not move (points/* events with one name a ledger entry).
  const data = { customer: hold.customerId, order: hold.orderId, points: hold.points, availableAt: hold.availableAt.toISOString(), description: hold.description, pendingEarn: id };
  return { shopId: hold.shopId, type: 'points/pending', data };
}

/**
 * Takes up to `points` back from the order's unreleased pending points, the latest first; returns
 * how many it took, for writePendingPoints to lower the customer's pending_points. Rows are locked
 * after the order's and before the customer's (the engine's lock order).
 */
export async function takePendingPoints(trx: Trx, take: { orderId: string; points: number }): Promise<number> {
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
