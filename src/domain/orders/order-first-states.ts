import { sql } from 'kysely';
import { PREPARED } from '../../db/database.js';
import type { Queryable } from '../../db/transaction.js';
import { discountCodeJson, markCodesUsed } from '../codes/index.js';
import { parseIdentifier } from '../customers/index.js';
import { announceOutboxWrite, newEventId, newId } from '../kernel/index.js';
import { activityJson, type Hold, MAX_BALANCE, pendingEvent } from '../ledger/index.js';
import { MULTIPLIER_ONE } from './order-earn.js';
import { attempt, customerNamed, holdOf, insertPlannedRows, isPlan, needsLockedPath, orderDescription, type Outcome, type Plan, plannedRow, planPut, readPrograms, type ShopProgram, tierMultiplier } from './order-plans.js';
import { orderJson, type OrderPut, toOrder } from './orders.js';

/**
 * Most PUTs are an order's first state (a new order, paid): those are written in ONE statement per
 * batch, outside any transaction, as balance changes are (points.ts): the order, the points it
 * earns (a ledger entry, or pending points) and their events. That is what lets PUT /orders keep
 * up with points/add; the locked path (order-writes.ts) takes a transaction of five statements or more.
 * The codes the orders used become used in the same statement (the codes locked first).
 *
 * The statement finds and locks the customers itself; the shops' programs (what an order earns by)
 * come from a cache, and are used only while their version is the shop's (a rule or setting changed
 * since, on any instance: the PUT goes the locked path, which reads them afresh).
 *
 * Undefined at a PUT's index: the order exists, or the PUT needs the locked path to be decided
 * (an unknown customer, a state refused as a first state, a balance near its limit, a changed
 * program, a first state refunded or cancelled with codes); nothing of it was written. The locked path then writes it, or refuses it.
 */
export async function writeFirstStates(db: Queryable, puts: OrderPut[]): Promise<Array<Outcome | undefined>> {
  const programs = await programsOf(db, puts);
  const outcomes: Array<Outcome | undefined> = puts.map(() => undefined);
  // The customer is the statement's to find: planned with none (a first state's plan does not depend on it).
  const plans = puts.flatMap((put, index) => {
    const program = programs.get(put.shopId);
    // Planned at ×1: a customer whose tier multiplies is left to the locked path (below).
    const plan = program && !needsLockedPath(put) && attempt(() => planPut({ put, index, customerId: '', multiplierBp: MULTIPLIER_ONE }, undefined, program));
    return isPlan(plan) ? [plan] : [];
  });
  if (plans.length === 0) return outcomes;

  const writes = plans.map((plan) => firstStateWrite(plan, programs.get(plan.put.shopId)!));
  const rows = await insertFirstStates(db, writes);
  for (const { n, customer_id, stale_shop } of rows) {
    if (stale_shop !== null) forget(db, stale_shop);
    else outcomes[writes[n!]!.plan.index] = { order: { ...writes[n!]!.order, customer: customer_id! }, created: true, changed: true };
  }
  return outcomes;
}

type FirstStateWrite = ReturnType<typeof firstStateWrite>;

/**
 * The statement: the orders, their points, the codes they used and the events. A row per order
 * written (`n`, its index in `writes`, and its customer), and one per shop whose program was stale.
 */
async function insertFirstStates(db: Queryable, writes: FirstStateWrite[]) {
  // An insert into a table with statement triggers runs them even when it inserts no row: the
  // statement leaves out the inserts none of its writes needs (one prepared text per combination).
  const anyCredit = writes.some((w) => w.input.credit > 0);
  const anyHold = writes.some((w) => w.input.hold > 0);
  const anyCodes = writes.some((w) => w.input.code_event_ids.length > 0);
  // The issued codes the orders name are locked first (in id order: a code's cancellation or expiry
  // locks the code, then its customer to give points back), then the customers (in id order), then
  // the orders inserted in key order: no order row is locked before, and an insert waits only for
  // another insert of the same new order. The codes of the orders written become used by them.
  const { rows } = await sql<{ n: number | null; customer_id: string | null; stale_shop: string | null }>`${sql.raw(PREPARED)}
    with input as (
      select * from jsonb_to_recordset(${JSON.stringify(writes.map((w, n) => ({ ...w.input, n })))}::jsonb)
        as i(n int, shop_id text, email text, shopify_id text, program_version int, row jsonb, credit int, hold int, available_at timestamptz,
          description text, activity_id text, earned_event_id text, pending_id text, created_at timestamptz, pending_event jsonb,
          order_event_id text, money jsonb, code_event_ids jsonb)
    ), ${anyCodes ? sql`codes as (
      -- Each code the orders name, found by its own index probe (as the customers below), and locked
      -- in id order. Its id, kept, spares the update a join the generic plan would make a pass over every code.
      -- The limit (a code is unique in its shop) keeps the probe a probe: without, the planner pulls the
      -- subquery up into a join and, counting on 100 × 100 input codes, hashes every code of every shop.
      select i.n, c.k, l.id from input i cross join lateral jsonb_array_elements(i.row->'discount_codes') with ordinality as c(value, k)
        cross join lateral (select d.id from discount_codes d where d.shop_id = i.shop_id and d.code = c.value->>'code' and d.status = 'issued' limit 1) l
    ), code_locks as (
      select l.id from (select distinct id from codes order by id) x
        cross join lateral (select d.id from discount_codes d where d.id = x.id and d.status = 'issued' for update) l
    ), ` : sql``}named as (
      select i.n, c.id from input i cross join lateral (${customerNamed(sql`i`)}) c
    ), target as (
      -- Each customer locked by its own index probe, in id order. The plan is generic and counts on
      -- 100 input rows: a join, or = any(...), was planned as a pass over every customer of a small
      -- table (a thousand), two thirds of the statement's time.
      select l.id, l.points from (select distinct id from named order by id) nm
        cross join lateral (select c.id, c.points from customers c where c.id = nm.id for no key update) l
      ${anyCodes ? sql`-- A one-time filter: the codes are locked before the first customer.
      where (select count(*) from code_locks) >= 0` : sql``}
    ), programs as (
      select s.id, s.program_version from shops s where s.id = any(array(select distinct shop_id from input))
    ), credits as (
      -- What this statement credits each customer, in all.
      select nm.n, nm.id, sum(i.credit) over (partition by nm.id) as total from input i join named nm using (n)
    ), fits as (
      -- A customer whose balance these credits would take past the limit is left to the locked path,
      -- which refuses just the credit that passes it; so is a shop whose program changed, and a
      -- customer whose tier multiplies (the plan counted ×1).
      select i.*, c.id as customer_id, i.row->>'id' as id from input i join credits c using (n) join target t on t.id = c.id
        join programs s on s.id = i.shop_id and s.program_version = i.program_version
      where t.points + c.total <= ${MAX_BALANCE} and ${tierMultiplier(sql`c.id`)} = ${MULTIPLIER_ONE}
    ), inserted as (
      ${insertPlannedRows(sql`fits f cross join lateral jsonb_populate_record(null::orders, f.row) o`, sql`f.customer_id`)}
      returning id
    ), done as (
      -- Each credit in turn: the balance before it is the locked one plus the customer's earlier credits.
      select f.*, t.points + coalesce(sum(f.credit) over (partition by f.customer_id order by f.n rows between unbounded preceding and 1 preceding), 0) as old_points
      from fits f join inserted using (id) join target t on t.id = f.customer_id
    ), balances as (
      update customers c set points = c.points + d.credit, pending_points = c.pending_points + d.hold,
        updated_at = case when d.credit > 0 then ${new Date()} else c.updated_at end
      from (select customer_id, sum(credit)::int as credit, sum(hold)::int as hold from done group by customer_id) d
      where c.id = d.customer_id and (d.credit > 0 or d.hold > 0)
    ), ${anyCredit ? sql`ledger as (
      insert into activities (id, shop_id, customer_id, type, setting_type, description, note, old_points, new_points, created_at, updated_at)
      select activity_id, shop_id, customer_id, 'earn_points', 'order', description, null, old_points, old_points + credit, created_at, created_at
      from done where credit > 0
      returning *
    ), ` : sql``}${anyHold ? sql`held as (
      insert into pending_points (id, shop_id, customer_id, order_id, points, available_at)
      select pending_id, shop_id, customer_id, id, hold, available_at from done where hold > 0
    ), ` : sql``}${anyCodes ? sql`used as (
      ${markCodesUsed(sql`(select distinct on (c.id) c.id, f.n, f.created_at as at, f.row->>'order_id' as order_id, f.customer_id,
          f.code_event_ids->>(c.k::int - 1) as event_id
        from done f join codes c using (n) order by c.id, f.n) u`)}
      returning d.*, u.n, u.event_id
    ), ` : sql``}events as (
      -- Each event names the customer; points/earned is its ledger entry as written, orders/created
      -- the order as the API shows it (activityJson and orderJson: toActivity and toOrder in SQL).
      insert into outbox_events (id, shop_id, type, data)
      select id, shop_id, type, data from (
        ${anyCredit ? sql`select d.n, 1 as k, d.earned_event_id as id, d.shop_id, 'points/earned' as type, ${activityJson(sql`a`, sql`d.row->>'created_at'`)} as data
        from done d join ledger a on a.id = d.activity_id
        union all
        ` : sql``}${anyHold ? sql`select d.n, 2 as k, d.pending_event->>'id' as id, d.shop_id, 'points/pending' as type, d.pending_event->'data' || jsonb_build_object('customer', d.customer_id) as data
        from done d where d.pending_event is not null
        union all
        ` : sql``}${anyCodes ? sql`select u.n, 4 as k, u.event_id as id, u.shop_id, 'redemptions/used' as type, ${discountCodeJson(sql`u`)} as data
        from used u
        union all
        ` : sql``}select d.n, 3 as k, d.order_event_id as id, d.shop_id, 'orders/created' as type, ${orderJson(sql`d.row`, sql`d.money`, sql`d.customer_id`)} as data
        from done d
      ) e
      order by n, k
    )
    select n, customer_id, null as stale_shop from done
    union all
    select null, null, s.id from programs s join (select distinct shop_id, program_version from input) i on s.id = i.shop_id and s.program_version <> i.program_version`.execute(db);
  if (rows.some((r) => r.n !== null)) announceOutboxWrite(db);
  return rows;
}

/** What the statement writes for one first state: its row, the points it earns, and their events, in order; the customer is filled in by it. */
function firstStateWrite(plan: Plan, program: ShopProgram) {
  const { put, difference } = plan;
  const row = plannedRow(plan, newId());
  const description = orderDescription(put);
  const credit = difference > 0 && program.pendingDays === 0 ? difference : 0;
  const hold: Hold | undefined = difference > 0 && program.pendingDays > 0 ? holdOf(plan, row.id, program.pendingDays) : undefined;
  const pendingId = hold ? newId() : null;
  const order = toOrder(row);
  const named = parseIdentifier(put.data.customerIdentifier);
  return {
    plan,
    order,
    input: {
      shop_id: put.shopId,
      email: 'email' in named ? named.email : null,
      shopify_id: 'shopifyCustomerId' in named ? named.shopifyCustomerId : null,
      program_version: program.version,
      row,
      credit,
      hold: hold?.points ?? 0,
      available_at: hold?.availableAt ?? null,
      description,
      activity_id: credit > 0 ? newId() : null,
      earned_event_id: credit > 0 ? newEventId() : null,
      pending_id: pendingId,
      created_at: put.now,
      pending_event: hold ? { id: newEventId(), data: pendingEvent(hold, pendingId!).data } : null,
      order_event_id: newEventId(),
      money: [order.subtotal, order.shipping, order.tax, order.total, order.refunded],
      // One per code the order names: the event of each it uses.
      code_event_ids: (put.discountCodes ?? []).map(() => newEventId()),
    },
  };
}

/** Shops' programs by the database they were read from; a shop's entry goes once its version is found stale. */
const programCaches = new WeakMap<Queryable, Map<string, ShopProgram>>();
/** Shops whose programs one process keeps (a handful of rules each); past that, the oldest read goes. */
const MAX_CACHED_PROGRAMS = 10_000;

async function programsOf(db: Queryable, puts: OrderPut[]): Promise<Map<string, ShopProgram>> {
  // A transaction (the Shopify connector's) is a new object each time: a cache keyed by it would never be read again.
  if (db.isTransaction) return readPrograms(db, [...new Set(puts.map((p) => p.shopId))]);
  let cache = programCaches.get(db);
  if (!cache) programCaches.set(db, (cache = new Map()));
  const missing = [...new Set(puts.map((p) => p.shopId))].filter((id) => !cache.has(id));
  if (missing.length) {
    for (const [id, program] of await readPrograms(db, missing)) cache.set(id, program);
    for (const id of cache.keys()) {
      if (cache.size <= MAX_CACHED_PROGRAMS) break;
      cache.delete(id);
    }
  }
  return cache;
}

function forget(db: Queryable, shopId: string): void {
  programCaches.get(db)?.delete(shopId);
}
