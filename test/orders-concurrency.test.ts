import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type EarnSnapshot, orderPoints, type OrderState } from '../src/domain/orders/order-earn.js';
import { updateShopSettings } from '../src/domain/settings/shop-settings.js';
import { startTestApp, type TestApp } from './helpers.js';

let t: TestApp;
const db = () => t.app.database.db;

const put = (apiKey: string, orderId: string, body: unknown) =>
  fetch(`${t.url}/rest-api/v1/orders/${orderId}`, {
    method: 'PUT',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${apiKey}` },
    body: JSON.stringify(body),
  });

/** Ten lines of $10.00 each ($100): state k refunds k of them, by units. */
function state(customerIdentifier: string, refundedLines: number) {
  const lineItems = Array.from({ length: 10 }, (_, i) => ({ productId: `p${i}`, quantity: 1, price: '10.00', refundedQuantity: i < refundedLines ? 1 : 0 }));
  const status = refundedLines === 0 ? 'paid' : refundedLines === 10 ? 'refunded' : 'partially_refunded';
  return { customerIdentifier, currency: 'USD', subtotal: '100.00', total: '100.00', refunded: `${refundedLines * 10}.00`, status, lineItems };
}

async function setUp(name: string, pendingDays = 0) {
  const shop = await t.shop(name);
  await t.graphql(shop.apiKey, 'mutation { earningRuleCreate(input: { type: place_order, name: "1 pt per $1", earnPoint: 1, spent: "1.00" }) { userErrors { message } } }');
  if (pendingDays) await updateShopSettings(db(), shop.shopId, { pendingDays });
  return shop;
}

/** The order's net earn from its stored state and snapshot, recomputed here: what the ledger must add up to. */
async function checkLedger(shopId: string) {
  const customers = await db().selectFrom('customers').selectAll().where('shop_id', '=', shopId).execute();
  for (const c of customers) {
    const activities = await db().selectFrom('activities').selectAll().where('customer_id', '=', c.id).orderBy('seq').execute();
    expect(c.points).toBe(activities.at(-1)?.new_points ?? 0);
    activities.forEach((a, i) => expect(a.old_points).toBe(i === 0 ? 0 : activities[i - 1]!.new_points));
    const orders = await db().selectFrom('orders').selectAll().where('customer_id', '=', c.id).execute();
    const pending = await db().selectFrom('pending_points').select((eb) => eb.fn.coalesce(eb.fn.sum<number>('points'), eb.lit(0)).as('n')).where('customer_id', '=', c.id).where('released_at', 'is', null).executeTakeFirstOrThrow();
    expect(c.pending_points).toBe(Number(pending.n));
    let nets = 0;
    let unrecovered = 0;
    for (const o of orders) {
      const lines = o.line_items as Array<{ productId: string; quantity: number; price: string; discount: string; refundedQuantity: number; collectionIds: string[] }>;
      const orderState: OrderState = {
        status: o.status,
        shippingMinor: o.shipping_minor,
        taxMinor: o.tax_minor,
        totalMinor: o.total_minor,
        refundedMinor: o.refunded_minor,
        lineItems: lines.map((l) => ({ productId: l.productId, collectionIds: l.collectionIds, quantity: l.quantity, priceMinor: Math.round(Number(l.price) * 100), discountMinor: 0, refundedQuantity: l.refundedQuantity })),
      };
      const net = orderPoints(o.earn_snapshot as EarnSnapshot, orderState);
      expect(o.points_earned - o.points_clawed_back).toBe(net);
      nets += net;
      unrecovered += o.unrecovered_points;
    }
    // What the balance received from the orders, plus what still waits, less what could not be taken back, is their net earn.
    const moved = activities.filter((a) => a.type === 'earn_points' || a.type === 'clawback_points').reduce((sum, a) => sum + a.new_points - a.old_points, 0);
    expect(moved + c.pending_points - unrecovered).toBe(nets);
  }
}

beforeAll(async () => {
  t = await startTestApp();
});
afterAll(() => t?.stop());

describe('orders under concurrency', () => {
  it('50 racing PUTs of one order\'s states: the last committed state\'s earn, exactly', async () => {
    const shop = await setUp('Racing states');
    await t.customer(shop.shopId, 'race-1');
    // States only move forward, so some PUTs are refused (status backwards): each state is either applied once or refused whole.
    const results = await Promise.all(Array.from({ length: 50 }, (_, i) => put(shop.apiKey, 'R-1', state('race-1', i % 6))));
    expect(results.every((r) => [200, 201, 422].includes(r.status))).toBe(true);
    expect(results.filter((r) => r.status === 201)).toHaveLength(1);
    await checkLedger(shop.shopId);
  });

  it('50 racing refunds of one paid order, in pending and then in available points', async () => {
    for (const pendingDays of [0, 10]) {
      const shop = await setUp(`Racing refunds ${pendingDays}`, pendingDays);
      await t.customer(shop.shopId, 'race-2');
      expect((await put(shop.apiKey, 'R-2', state('race-2', 0))).status).toBe(201);
      const results = await Promise.all(Array.from({ length: 50 }, (_, i) => put(shop.apiKey, 'R-2', state('race-2', 1 + (i % 10)))));
      expect(results.every((r) => [200, 422].includes(r.status))).toBe(true);
      await checkLedger(shop.shopId);
    }
  });

  it('many orders of a few customers at once (they share batches) with refunds and spending between: every earn exact', async () => {
    for (const pendingDays of [0, 10]) {
      const shop = await setUp(`Shared batches ${pendingDays}`, pendingDays);
      const customers = ['mix-1', 'mix-2', 'mix-3'];
      for (const c of customers) await t.customer(shop.shopId, c, 50);
      const orders = Array.from({ length: 60 }, (_, i) => ({ id: `M-${i}`, customer: customers[i % 3]! }));
      const first = await Promise.all(orders.map((o) => put(shop.apiKey, o.id, state(o.customer, 0))));
      expect(first.map((r) => r.status)).toEqual(orders.map(() => 201));
      // Refunds of half the orders race new states of the others, spending and more new orders.
      const second = await Promise.all([
        ...orders.map((o, i) => put(shop.apiKey, o.id, state(o.customer, i % 2 ? 3 + (i % 8) : 0))),
        ...orders.map((o) => put(shop.apiKey, `${o.id}-b`, state(o.customer, 0))),
        ...customers.flatMap((c) => Array.from({ length: 5 }, () => t.post('/rest-api/v1/points/substract', { customerIdentifier: c, amount: 40 }, shop.apiKey))),
      ]);
      expect(second.flatMap((r, i) => ([200, 201, 422].includes(r.status) ? [] : [`${i}: ${r.status}`]))).toEqual([]);
      await checkLedger(shop.shopId);
      const events = await db().selectFrom('outbox_events').select(['type']).where('shop_id', '=', shop.shopId).where('type', 'like', 'orders/%').execute();
      expect(events.filter((e) => e.type === 'orders/created')).toHaveLength(120);
    }
  });

  it('a PUT the rules refuse fails alone: its neighbours in the batch are written, a refused new order leaves nothing', async () => {
    const shop = await setUp('Refused in a batch');
    await t.customer(shop.shopId, 'near-limit', 1_000_000_000);
    for (const amount of [1_000_000_000, 147_483_600]) await t.post('/rest-api/v1/points/add', { customerIdentifier: 'near-limit', amount }, shop.apiKey);
    for (let i = 0; i < 10; i++) await t.customer(shop.shopId, `fine-${i}`);
    const results = await Promise.all([
      put(shop.apiKey, 'L-1', state('near-limit', 0)),
      put(shop.apiKey, 'L-2', state('nobody', 0)),
      ...Array.from({ length: 30 }, (_, i) => put(shop.apiKey, `F-${i}`, state(`fine-${i % 10}`, 0))),
    ]);
    expect(results[0]!.status).toBe(422);
    expect(((await results[0]!.json()) as { error: string }).error).toBe('points_limit_exceeded');
    expect(results[1]!.status).toBe(404);
    expect(results.slice(2).map((r) => r.status)).toEqual(Array(30).fill(201));
    const stored = await db().selectFrom('orders').select('order_id').where('shop_id', '=', shop.shopId).execute();
    expect(stored.map((o) => o.order_id).sort()).toEqual(Array.from({ length: 30 }, (_, i) => `F-${i}`).sort());
    await checkLedger(shop.shopId);
  });

  it('the same state 50 times at once earns once', async () => {
    const shop = await setUp('Same state');
    await t.customer(shop.shopId, 'race-3', 7);
    const results = await Promise.all(Array.from({ length: 50 }, () => put(shop.apiKey, 'R-3', state('race-3', 0))));
    expect(results.map((r) => r.status).sort()).toEqual([...Array(49).fill(200), 201]);
    const c = await db().selectFrom('customers').select('points').where('shop_id', '=', shop.shopId).executeTakeFirstOrThrow();
    expect(c.points).toBe(107);
    await checkLedger(shop.shopId);
  });
});
