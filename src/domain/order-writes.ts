import { sql } from 'kysely';
import type { DB } from '../db/database.js';
import { groupCommit } from '../db/group-commit.js';
import type { EarningRuleRow, OrderRow } from '../db/schema.js';
import { inTransaction, type Queryable, type Trx } from '../db/transaction.js';
import { customerNotFound, parseIdentifier } from './customers.js';
import { DomainError, RuleViolationError } from './errors.js';
import { recordShopEvents, type ShopEvent } from './events.js';
import { newId } from './ids.js';
import { type EarnSnapshot, EARNING_STATUSES, orderPoints } from './order-earn.js';
import { checkTransition, earnSnapshot, type Order, type OrderPut, orderState, parseOrderPut, toOrder } from './orders.js';
import { type Hold, takePendingPoints, writePendingPoints } from './pending-points.js';
import { type BalanceChange, MAX_AMOUNT, nextBalance, writeLockedBalanceChanges } from './points.js';

export type UpsertResult = { order: Order; created: boolean; changed: boolean };

/**
 * PUT semantics: the order's full state. The same state again changes nothing; a new state applies
 * exactly the difference between what it earns and what was credited before, once: the order's row
 * lock serialises concurrent PUTs of one order, and each compares with the state committed before it.
 *
 * Outside a transaction, concurrent PUTs of different orders share one transaction (group commit,
 * as balance changes do): a handful of statements serve the whole batch, not ten per order.
 */
export async function upsertOrder(db: Queryable, shopId: string, orderIdInput: unknown, input: unknown, now = new Date()): Promise<UpsertResult> {
  const put = parseOrderPut(shopId, orderIdInput, input, now);
  const outcome = db.isTransaction ? (await writeOrders(db as Trx, [put]))[0]! : await orderWriter(db as DB)(put);
  if (outcome instanceof DomainError) throw outcome;
  return outcome;
}

type Outcome = UpsertResult | DomainError;

const orderWriters = new WeakMap<DB, (put: OrderPut) => Promise<Outcome>>();

function orderWriter(db: DB): (put: OrderPut) => Promise<Outcome> {
  let writer = orderWriters.get(db);
  if (!writer) {
    writer = groupCommit({
      write: (puts) => inTransaction(db, (trx) => writeOrders(trx, puts)),
      // Two states of one order never share a batch: the second must see the first's result.
      key: (put) => `${put.shopId} ${put.orderId}`,
      // As for balance changes (points.ts): two batches at once keep PostgreSQL busy while one commits.
      maxInFlight: 2,
      maxBatch: 64,
    });
    orderWriters.set(db, writer);
  }
  return writer;
}

/** One PUT on its way through a batch: what the database said, and what it will write. */
type Plan = {
  put: OrderPut;
  index: number;
  customerId: string;
  row: OrderRow;
  created: boolean;
  snapshot: EarnSnapshot | null;
  earnNote: string | null;
  /** What the new state earns minus what the order holds now: credited (> 0) or taken back (< 0). */
  difference: number;
  counters: { earned: number; pending: number; clawedBack: number; unrecovered: number };
};

/**
 * PUTs of different orders in one transaction, in a fixed number of statements. Lock order, as on
 * every engine path: the orders' rows (in id order), then their pending points, then the customers
 * (in id order). A PUT the rules refuse gets its error at its index and writes nothing; the others go on.
 */
export async function writeOrders(trx: Trx, puts: OrderPut[]): Promise<Outcome[]> {
  const outcomes: Outcome[] = new Array(puts.length);
  const fail = (index: number, err: unknown) => {
    if (!(err instanceof DomainError)) throw err;
    outcomes[index] = err;
  };

  const customers = await customerIds(trx, puts);
  const found = puts.flatMap((put, index) => {
    const customerId = customers[index];
    if (customerId === undefined) fail(index, customerNotFound(put.data.customerIdentifier));
    return customerId === undefined ? [] : [{ put, index, customerId }];
  });
  const created = await insertNewOrders(trx, found);
  const rows = await lockOrders(trx, found.map((f) => f.put));
  const shops = await shopSettings(trx, puts);

  // 1. Each PUT against its order's stored state: refused, unchanged, or a plan with a difference.
  let rules: Map<string, EarningRuleRow[]> | undefined;
  const plans: Plan[] = [];
  for (const { put, index, customerId } of found) {
    const key = orderKey(put);
    const row = rows.get(key)!;
    const isNew = created.has(key);
    try {
      if (row.customer_id !== customerId) {
        throw new RuleViolationError('order_customer_changed', `order ${put.orderId} belongs to another customer; an order cannot move`, ['customerIdentifier']);
      }
      if (!isNew) {
        const stale = put.data.sourceUpdatedAt && row.source_updated_at && put.data.sourceUpdatedAt < row.source_updated_at;
        if (stale || row.state_hash === put.stateHash) {
          outcomes[index] = { order: toOrder(row), created: false, changed: false };
          continue;
        }
        checkTransition(row, put);
      }
      const shop = shops.get(put.shopId)!;
      // The rules of the first paid state stay the order's rules: refunds and edits recompute against them.
      let snapshot = row.earn_snapshot as EarnSnapshot | null;
      let earnNote = row.earn_note;
      if (!snapshot && EARNING_STATUSES.has(put.data.status)) {
        if (put.data.currency !== shop.currency) {
          earnNote = `the order is in ${put.data.currency} and the shop's program in ${shop.currency}: it earns nothing`;
        } else {
          rules ??= await placeOrderRules(trx, puts);
          snapshot = earnSnapshot(rules.get(put.shopId) ?? [], put.now);
          earnNote = snapshot.rules.length ? null : 'no place_order rule was active when the order was paid';
        }
      }
      const target = put.data.currency === shop.currency ? orderPoints(snapshot, orderState(put)) : 0;
      if (target > MAX_AMOUNT) throw new RuleViolationError('order_points_limit', `the order would earn ${target} points; at most ${MAX_AMOUNT}`, ['total']);
      const counters = { earned: row.points_earned, pending: row.points_pending, clawedBack: row.points_clawed_back, unrecovered: row.unrecovered_points };
      plans.push({ put, index, customerId, row, created: isNew, snapshot, earnNote, difference: target - (counters.earned - counters.clawedBack), counters });
    } catch (err) {
      fail(index, err);
    }
  }

  // 2. Refunds take back pending points first: they were never spendable (locked after the orders).
  const takenBack = new Map<Plan, number>();
  for (const plan of plans.filter((p) => p.difference < 0)) {
    takenBack.set(plan, await takePendingPoints(trx, { orderId: plan.row.id, points: -plan.difference }));
  }

  // 3. The balances, under the customers' locks, as each change in turn leaves them.
  const balances = await lockBalances(trx, plans);
  const changes: Array<{ shopId: string; customerId: string; change: BalanceChange }> = [];
  const holds: Hold[] = [];
  const events: ShopEvent[] = [];
  const written: Plan[] = [];
  for (const plan of plans) {
    const { put, counters, customerId, difference } = plan;
    const description = `order ${put.orderId}`;
    const pendingDays = shops.get(put.shopId)!.pendingDays;
    try {
      if (difference > 0 && pendingDays > 0) {
        holds.push({ shopId: put.shopId, customerId, orderId: plan.row.id, points: difference, availableAt: new Date(put.now.getTime() + pendingDays * 86_400_000), description });
        counters.pending += difference;
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
          events.push({ shopId: put.shopId, type: 'points/clawed_back', data: { customer: customerId, order: plan.row.id, orderId: put.orderId, points: owed, fromPending, unrecovered: rest } });
        }
      }
      if (difference > 0) counters.earned += difference;
      written.push(plan);
    } catch (err) {
      fail(plan.index, err);
    }
  }

  // 4. The writes: the ledger, the holds, the orders and their events, a statement for each kind.
  await writeLockedBalanceChanges(trx, changes);
  // Their events first, as when each hold recorded its own.
  events.unshift(...(await writePendingPoints(trx, holds, [...takenBack].map(([plan, points]) => ({ customerId: plan.customerId, points })))));
  const updated = await updateOrders(trx, written);
  for (const plan of written) {
    const order = toOrder(updated.get(plan.row.id)!);
    events.push({ shopId: plan.put.shopId, type: plan.created ? 'orders/created' : 'orders/updated', data: order });
    outcomes[plan.index] = { order, created: plan.created, changed: true };
  }
  await recordShopEvents(trx, events);
  // A new order whose first state was refused leaves nothing behind.
  const refusedNew = found.filter((f) => created.has(orderKey(f.put)) && outcomes[f.index] instanceof DomainError).map((f) => rows.get(orderKey(f.put))!.id);
  if (refusedNew.length) await trx.deleteFrom('orders').where('id', 'in', refusedNew).execute();
  return outcomes;
}

const orderKey = (put: OrderPut) => `${put.shopId} ${put.orderId}`;

/** Our id of the customer each PUT names (undefined: no such customer), one index probe each. */
async function customerIds(trx: Trx, puts: OrderPut[]): Promise<Array<string | undefined>> {
  const named = puts.map((p) => parseIdentifier(p.data.customerIdentifier));
  const { rows } = await sql<{ ord: number; id: string }>`
    select (i.ord - 1)::int as ord, c.id
    from unnest(${puts.map((p) => p.shopId)}::text[], ${named.map((n) => ('email' in n ? n.email : null))}::text[],
      ${named.map((n) => ('shopifyCustomerId' in n ? n.shopifyCustomerId : null))}::text[]) with ordinality as i(shop_id, email, shopify_id, ord)
    cross join lateral (
      select c.id from customers c where c.shop_id = i.shop_id and lower(c.email) = i.email
      union all
      select c.id from customers c where c.shop_id = i.shop_id and c.shopify_customer_id = i.shopify_id
      limit 1) c`.execute(trx);
  const ids: Array<string | undefined> = puts.map(() => undefined);
  for (const row of rows) ids[row.ord] = row.id;
  return ids;
}

/**
 * An empty row for each order not yet recorded, so that every PUT then takes its order's row lock
 * alike; a first PUT racing this one waits for it and then applies as an update. The keys created.
 */
async function insertNewOrders(trx: Trx, found: Array<{ put: OrderPut; customerId: string }>): Promise<Set<string>> {
  if (found.length === 0) return new Set();
  const column = <V>(pick: (f: { put: OrderPut; customerId: string }) => V) => found.map(pick);
  const { rows } = await sql<{ shop_id: string; order_id: string }>`
    insert into orders (id, shop_id, customer_id, order_id, currency, subtotal_minor, shipping_minor, tax_minor, total_minor,
      refunded_minor, status, line_items, state_hash, created_at, updated_at)
    select id, shop_id, customer_id, order_id, currency, 0, 0, 0, 0, 0, 'pending', '[]', '', now, now
    from unnest(${column(() => newId())}::text[], ${column((f) => f.put.shopId)}::text[], ${column((f) => f.customerId)}::text[],
      ${column((f) => f.put.orderId)}::text[], ${column((f) => f.put.data.currency)}::text[], ${column((f) => f.put.now.toISOString())}::timestamptz[])
      as i(id, shop_id, customer_id, order_id, currency, now)
    on conflict (shop_id, order_id) do nothing
    returning shop_id, order_id`.execute(trx);
  return new Set(rows.map((r) => `${r.shop_id} ${r.order_id}`));
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

async function shopSettings(trx: Trx, puts: OrderPut[]): Promise<Map<string, { currency: string; pendingDays: number }>> {
  const rows = await trx
    .selectFrom('shops')
    .select(['id', 'currency', 'pending_days'])
    .where('id', 'in', [...new Set(puts.map((p) => p.shopId))])
    .execute();
  return new Map(rows.map((r) => [r.id, { currency: r.currency, pendingDays: r.pending_days }]));
}

/** The shops' active place_order rules, in creation order: read once a PUT of the batch earns for the first time. */
async function placeOrderRules(trx: Trx, puts: OrderPut[]): Promise<Map<string, EarningRuleRow[]>> {
  const rows = await trx
    .selectFrom('earning_rules')
    .selectAll()
    .where('shop_id', 'in', [...new Set(puts.map((p) => p.shopId))])
    .where('type', '=', 'place_order')
    .where('active', '=', true)
    .orderBy('created_at')
    .orderBy('id')
    .execute();
  const byShop = new Map<string, EarningRuleRow[]>();
  for (const row of rows) byShop.set(row.shop_id, [...(byShop.get(row.shop_id) ?? []), row]);
  return byShop;
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

/** Each plan's new state and counters, in one statement; the rows as written, by id. */
async function updateOrders(trx: Trx, plans: Plan[]): Promise<Map<string, OrderRow>> {
  if (plans.length === 0) return new Map();
  const states = plans.map(({ put, row, snapshot, earnNote, counters }) => ({
    id: row.id,
    subtotal_minor: put.amounts.subtotal,
    shipping_minor: put.amounts.shipping,
    tax_minor: put.amounts.tax,
    total_minor: put.amounts.total,
    refunded_minor: put.amounts.refunded,
    status: put.data.status,
    line_items: put.lineItems,
    processed_at: put.data.processedAt ?? row.processed_at,
    source_updated_at: put.data.sourceUpdatedAt ?? row.source_updated_at,
    state_hash: put.stateHash,
    earn_snapshot: snapshot,
    earn_note: earnNote,
    points_earned: counters.earned,
    points_pending: counters.pending,
    points_clawed_back: counters.clawedBack,
    unrecovered_points: counters.unrecovered,
    updated_at: put.now,
  }));
  const { rows } = await sql<OrderRow>`
    update orders o set
      subtotal_minor = s.subtotal_minor, shipping_minor = s.shipping_minor, tax_minor = s.tax_minor, total_minor = s.total_minor,
      refunded_minor = s.refunded_minor, status = s.status, line_items = s.line_items, processed_at = s.processed_at,
      source_updated_at = s.source_updated_at, state_hash = s.state_hash, earn_snapshot = s.earn_snapshot, earn_note = s.earn_note,
      points_earned = s.points_earned, points_pending = s.points_pending, points_clawed_back = s.points_clawed_back,
      unrecovered_points = s.unrecovered_points, updated_at = s.updated_at
    from jsonb_to_recordset(${JSON.stringify(states)}::jsonb) as s(
      id text, subtotal_minor bigint, shipping_minor bigint, tax_minor bigint, total_minor bigint, refunded_minor bigint, status text,
      line_items jsonb, processed_at timestamptz, source_updated_at timestamptz, state_hash text, earn_snapshot jsonb, earn_note text,
      points_earned int, points_pending int, points_clawed_back int, unrecovered_points int, updated_at timestamptz)
    where o.id = s.id
    returning o.*`.execute(trx);
  return new Map(rows.map((r) => [r.id, r]));
}
