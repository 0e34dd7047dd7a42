import { sql } from 'kysely';
import type { DB } from '../../db/database.js';
import type { Trx } from '../../db/transaction.js';
import { type DueWork, failedItems, failingItems, runClaimed } from '../kernel/index.js';
import { writeBalanceChange } from './points.js';

/**
 * Pending points becoming available (DESIGN.md "Pending points"): due rows are claimed with their
 * orders, FOR UPDATE SKIP LOCKED, so each is released once by whichever instance claims it, and an
 * order being changed right now (its row locked by a PUT) is simply taken at the next pass. Locks
 * follow the engine's order (order, pending row, then customer), customers in id order, so a
 * release never deadlocks with a PUT, a refund or another instance's release.
 */
export const pendingRelease: DueWork = {
  name: 'pending_points',
  async runDue(db: DB, now: Date, limit: number): Promise<number> {
    const failing = await failingItems(db, 'pending_points', now);
    return (
      (await runClaimed(db, now, failing, {
        claim: (trx, skip) => claimDue(trx, now, limit, skip),
        keyOf: (row) => ({ item: row.id, shopId: row.shop_id }),
        work: (trx, rows) => release(trx, rows, now),
      })) ?? 0
    );
  },
  async oldestDue(db: DB, now: Date): Promise<Date | null> {
    const skip = await failedItems(db, 'pending_points');
    let query = db.selectFrom('pending_points').select('available_at').where('released_at', 'is', null).where('available_at', '<=', now);
    if (skip.length) query = query.where('id', 'not in', skip);
    const row = await query.orderBy('available_at').limit(1).executeTakeFirst();
    return row?.available_at ?? null;
  },
};

type DueRow = Awaited<ReturnType<typeof claimDue>>[number];

/** Up to `limit` due rows, none of `skip` (their last try failed), with their orders, locked. */
function claimDue(trx: Trx, now: Date, limit: number, skip: readonly string[]) {
  let query = trx
    .selectFrom('pending_points as p')
    .innerJoin('orders as o', 'o.id', 'p.order_id')
    .select(['p.id', 'p.shop_id', 'p.customer_id', 'p.order_id', 'p.points', 'p.available_at', 'o.order_id as shop_order_id'])
    .where('p.released_at', 'is', null)
    .where('p.available_at', '<=', now);
  if (skip.length) query = query.where('p.id', 'not in', skip);
  return query.orderBy('p.available_at').orderBy('p.id').limit(limit).forUpdate(['o', 'p']).skipLocked().execute();
}

/** Releases claimed rows into their customers' balances, customers in id order. */
async function release(trx: Trx, rows: DueRow[], now: Date): Promise<number> {
  for (const row of [...rows].sort((a, b) => (a.customer_id < b.customer_id ? -1 : a.customer_id > b.customer_id ? 1 : 0))) {
    if (row.points > 0) {
      const written = await writeBalanceChange(trx, row.shop_id, { customerId: row.customer_id }, {
        op: 'add',
        amount: row.points,
        type: 'earn_points',
        settingType: 'order',
        // orderDescription's text first: the tier metric's rebuild finds an order's credits by it.
        description: `order ${row.shop_order_id}, pending until ${row.available_at.toISOString().slice(0, 10)}`,
        note: null,
        topic: 'points/available',
      });
      // Only a balance at its ceiling refuses an add: those points wait a day more rather than vanish.
      if (!written) {
        await trx.updateTable('pending_points').set({ available_at: new Date(now.getTime() + 86_400_000) }).where('id', '=', row.id).execute();
        continue;
      }
      await trx.updateTable('customers').set({ pending_points: sql`pending_points - ${row.points}` }).where('id', '=', row.customer_id).execute();
      // The order changed (its pending points), when its ledger entry says: the tier metric counts them on that day.
      await trx.updateTable('orders').set({ points_pending: sql`points_pending - ${row.points}`, updated_at: written.activity.createdAt }).where('id', '=', row.order_id!).execute();
    }
    await trx.updateTable('pending_points').set({ released_at: now }).where('id', '=', row.id).execute();
  }
  return rows.length;
}
