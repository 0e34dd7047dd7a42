import { sql } from 'kysely';
import type { DB } from '../../db/database.js';
import { GROUP_COMMIT, groupCommit } from '../../db/group-commit.js';
import type { DiscountCodeRow, OrderRow } from '../../db/schema.js';
import { inTransaction, type Queryable, type Trx } from '../../db/transaction.js';
import { type CodeUse, lockCodesForOrders, returnCodePoints, useCodes } from '../codes/index.js';
import { customerNotFound } from '../customers/index.js';
import { DomainError, newId, recordShopEvents, type ShopEvent } from '../kernel/index.js';
import { type BalanceChange, type Hold, nextBalance, takePendingPoints, writeLockedBalanceChanges, writePendingPoints } from '../ledger/index.js';
import { writeFirstStates } from './order-first-states.js';
import { attempt, codesOfPlan, ENDED_STATUSES, type Found, holdOf, insertPlannedRows, isPlan, orderDescription, orderKey, type Outcome, type Plan, plannedRow, planPut, readContext, updatePlannedRows, type UpsertResult } from './order-plans.js';
import { type OrderPut, parseOrderPut, toOrder } from './orders.js';

export type { UpsertResult } from './order-plans.js';

/**
 * PUT semantics: the order's full state. The same state again changes nothing; a new state applies
 * exactly the difference between what it earns and what was credited before, once: the order's row
 * lock serialises concurrent PUTs of one order, and each compares with the state committed before it.
 *
 * Two writers, each a group commit outside a transaction (as balance changes are): an order's first
 * state goes in one statement per batch (order-first-states.ts); what that leaves (stored orders,
 * refusals) goes through the locked path below, a handful of statements per batch in a transaction.
 */
export async function upsertOrder(db: Queryable, shopId: string, orderIdInput: unknown, input: unknown, now = new Date()): Promise<UpsertResult> {
  const put = parseOrderPut(shopId, orderIdInput, input, now);
  const outcome = db.isTransaction
    ? ((await writeFirstStates(db, [put]))[0] ?? (await writeOrders(db as Trx, [put]))[0]!)
    : ((await writers(db as DB).firstState(put)) ?? (await writers(db as DB).locked(put)));
  if (outcome instanceof DomainError) throw outcome;
  return outcome;
}

type Writers = { firstState: (put: OrderPut) => Promise<Outcome | undefined>; locked: (put: OrderPut) => Promise<Outcome> };
const orderWriters = new WeakMap<DB, Writers>();

function writers(db: DB): Writers {
  let found = orderWriters.get(db);
  if (!found) {
    const options = {
      // Two states of one order never share a batch: the second must see the first's result.
      key: (put: OrderPut) => orderKey(put),
      ...GROUP_COMMIT,
    };
    found = {
      firstState: groupCommit({ ...options, write: (puts) => writeFirstStates(db, puts) }),
      locked: groupCommit({ ...options, write: (puts) => inTransaction(db, (trx) => writeOrders(trx, puts)) }),
    };
    orderWriters.set(db, found);
  }
  return found;
}

/**
 * PUTs of different orders in one transaction, in a fixed number of statements. Lock order, as on
 * every engine path: the orders' rows (new ones as they are inserted, in key order; stored ones in
 * id order), then their pending points, then the customers (in id order). A PUT the rules refuse
 * gets its error at its index and writes nothing; the others go on.
 */
export async function writeOrders(trx: Trx, puts: OrderPut[]): Promise<Outcome[]> {
  const outcomes: Outcome[] = new Array(puts.length);
  const fail = (index: number, err: unknown) => {
    if (!(err instanceof DomainError)) throw err;
    outcomes[index] = err;
  };

  const context = await readContext(trx, puts);
  const found: Found[] = puts.flatMap((put, index) => {
    const customerId = context.customerIds[index];
    if (customerId === undefined) fail(index, customerNotFound(put.data.customerIdentifier));
    return customerId === undefined ? [] : [{ put, index, customerId, multiplierBp: context.multipliers[index]! }];
  });
  const planFor = (f: Found, row: OrderRow | undefined) => planPut(f, row, context.programs.get(f.put.shopId)!);

  // 0. The codes the orders name, and those they used whose points an order refunded or cancelled
  //    may give back: locked before anything else, as a code's cancellation locks it before its customer.
  const lockedCodes = await lockCodesForOrders(
    trx,
    found.flatMap(({ put }) => (put.discountCodes ?? []).map(({ code }) => ({ shopId: put.shopId, code }))),
    found.filter(({ put }) => ENDED_STATUSES.has(put.data.status) && context.programs.get(put.shopId)!.returnCodePointsOnRefund).map(({ put }) => put),
  );

  // 1. Most PUTs are an order's first state: planned as such and inserted whole, in one statement.
  //    The rest (the order exists, or its first state was refused) are planned against their stored rows.
  const firstStates = new Map<Found, Plan | UpsertResult | DomainError>();
  for (const f of found) firstStates.set(f, attempt(() => planFor(f, undefined)));
  const inserted = await insertOrders(trx, [...firstStates.values()].filter((p): p is Plan => isPlan(p)));
  const stored = await lockOrders(trx, found.filter((f) => !inserted.has(orderKey(f.put))).map((f) => f.put));
  const plans: Plan[] = [];
  for (const f of found) {
    const key = orderKey(f.put);
    const row = stored.get(key);
    const outcome = inserted.has(key) ? { ...(firstStates.get(f) as Plan), row: inserted.get(key)! } : row ? attempt(() => planFor(f, row)) : firstStates.get(f)!;
    if (isPlan(outcome)) plans.push(outcome);
    else if (outcome instanceof DomainError) fail(f.index, outcome);
    else outcomes[f.index] = outcome;
  }

  // 2. Refunds take back pending points first: they were never spendable (locked after the orders).
  const takenBack = new Map<Plan, number>();
  for (const plan of plans.filter((p) => p.difference < 0)) {
    takenBack.set(plan, await takePendingPoints(trx, { orderId: plan.row!.id, points: -plan.difference }));
  }

  // 3. The balances, under the customers' locks, as each change in turn leaves them.
  const balances = await lockBalances(trx, plans);
  const changes: Array<{ shopId: string; customerId: string; change: BalanceChange }> = [];
  const holds: Hold[] = [];
  const events: ShopEvent[] = [];
  const written: Plan[] = [];
  for (const plan of plans) {
    const { put, counters, customerId, difference } = plan;
    const description = orderDescription(put);
    const pendingDays = context.programs.get(put.shopId)!.pendingDays;
    try {
      if (difference > 0 && pendingDays > 0) {
        holds.push(holdOf(plan, plan.row!.id, pendingDays));
      } else if (difference > 0) {
        balances.set(customerId, nextBalance('add', balances.get(customerId)!, difference));
        changes.push({ shopId: put.shopId, customerId, change: { op: 'add', amount: difference, type: 'earn_points', settingType: 'order', description, note: null, topic: 'points/earned' } });
      } else if (difference < 0) {
        const owed = -difference;
        const fromPending = takenBack.get(plan)!;
        const rest = owed - fromPending;
        const fromBalance = Math.min(rest, balances.get(customerId)!);
        counters.pending -= fromPending;
        counters.clawedBack += owed;
        counters.unrecovered += rest - fromBalance;
        if (fromBalance > 0) {
          balances.set(customerId, balances.get(customerId)! - fromBalance);
          changes.push({ shopId: put.shopId, customerId, change: { op: 'subtract', amount: fromBalance, type: 'clawback_points', settingType: 'order', description, note: null, topic: 'points/clawed_back' } });
        } else {
          // No ledger entry (the balance did not move): the event says what was taken, and from where.
          events.push({ shopId: put.shopId, type: 'points/clawed_back', data: { customer: customerId, order: plan.row!.id, orderId: put.orderId, points: owed, fromPending, unrecovered: rest } });
        }
      }
      written.push(plan);
    } catch (err) {
      fail(plan.index, err);
    }
  }

  // 4. The writes: the ledger, the holds, the stored orders and the events, a statement for each kind.
  await writeLockedBalanceChanges(trx, changes);
  // Their events first, as when each hold recorded its own.
  events.unshift(...(await writePendingPoints(trx, holds, [...takenBack].map(([plan, points]) => ({ customerId: plan.customerId, points })))));
  const updated = await updateOrders(trx, written.filter((p) => !inserted.has(orderKey(p.put))));
  const codeUses: CodeUse[] = [];
  const returning: Plan[] = [];
  for (const plan of written) {
    const created = inserted.has(orderKey(plan.put));
    const order = toOrder(created ? plan.row! : updated.get(plan.row!.id)!);
    events.push({ shopId: plan.put.shopId, type: created ? 'orders/created' : 'orders/updated', data: order });
    outcomes[plan.index] = { order, created, changed: true };
    const codes = codesOfPlan(plan, created, context.programs.get(plan.put.shopId)!);
    codeUses.push(...codes.uses);
    if (codes.returnsPoints) returning.push(plan);
  }
  await recordShopEvents(trx, events);
  await writeCodes(trx, lockedCodes, codeUses, returning);
  // A new order whose first state was refused (at the balance limit) leaves nothing behind.
  const refusedNew = plans.filter((p) => inserted.has(orderKey(p.put)) && outcomes[p.index] instanceof DomainError).map((p) => p.row!.id);
  if (refusedNew.length) await trx.deleteFrom('orders').where('id', 'in', refusedNew).execute();
  return outcomes;
}

/**
 * The codes the written orders used become used (after the orders' events, as on the first-state
 * path); then the orders that became fully refunded or cancelled give back, once, the points of
 * the codes they used (the code's returned_activity_id says they came back already).
 */
async function writeCodes(trx: Trx, locked: DiscountCodeRow[], uses: CodeUse[], returning: Plan[]): Promise<void> {
  const codes = new Map(locked.map((row) => [row.id, row]));
  for (const row of await useCodes(trx, uses)) codes.set(row.id, row);
  for (const { put } of returning) {
    for (const row of codes.values()) {
      if (row.shop_id === put.shopId && row.order_id === put.orderId && row.status === 'used') await returnCodePoints(trx, row, `Order ${put.orderId} refunded`);
    }
  }
}

/** First states the locked path writes (their first write was left to it), inserted whole; the rows inserted, by key. */
async function insertOrders(trx: Trx, plans: Plan[]): Promise<Map<string, OrderRow>> {
  if (plans.length === 0) return new Map();
  const { rows } = await sql<OrderRow>`${insertPlannedRows(sql`jsonb_populate_recordset(null::orders, ${JSON.stringify(plans.map((p) => plannedRow(p, newId())))}::jsonb) o`)} returning *`.execute(trx);
  return new Map(rows.map((r) => [`${r.shop_id} ${r.order_id}`, r]));
}

async function lockOrders(trx: Trx, puts: OrderPut[]): Promise<Map<string, OrderRow>> {
  if (puts.length === 0) return new Map();
  const rows = await trx
    .selectFrom('orders')
    .selectAll()
    .where(sql<boolean>`(shop_id, order_id) in (select * from unnest(${puts.map((p) => p.shopId)}::text[], ${puts.map((p) => p.orderId)}::text[]))`)
    .orderBy('id')
    .forUpdate()
    .execute();
  return new Map(rows.map((r) => [`${r.shop_id} ${r.order_id}`, r]));
}

/**
 * The balances of the customers whose points move, under the row lock balance changes take, so a
 * clawback never takes more than is there (points spent meanwhile are the shortfall, not a
 * negative balance) and an earn never passes the balance limit.
 */
async function lockBalances(trx: Trx, plans: Plan[]): Promise<Map<string, number>> {
  const ids = [...new Set(plans.filter((p) => p.difference !== 0).map((p) => p.customerId))];
  if (ids.length === 0) return new Map();
  const rows = await trx.selectFrom('customers').select(['id', 'points']).where('id', 'in', ids).orderBy('id').forNoKeyUpdate().execute();
  return new Map(rows.map((r) => [r.id, r.points]));
}

/** Each stored order's new state and counters, in one statement; the rows as written, by id. */
async function updateOrders(trx: Trx, plans: Plan[]): Promise<Map<string, OrderRow>> {
  if (plans.length === 0) return new Map();
  const { rows } = await sql<OrderRow>`${updatePlannedRows(plans.map((p) => plannedRow(p)))} returning orders.*`.execute(trx);
  return new Map(rows.map((r) => [r.id, r]));
}
