import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { toActivity } from '../src/domain/ledger/points.js';
import { updateShopSettings } from '../src/domain/settings/shop-settings.js';
import { isolatedPostgresUrl, onPostgres, startTestApp, type TestApp } from './helpers.js';

let t: TestApp;
let shop: { shopId: string; apiKey: string };

const db = () => t.app.database.db;

/** A place_order rule through the API: 1 point per `spent` of the shop's currency, on the lines only by default. */
async function placeOrderRule(apiKey: string, rule: { earnPoint?: number; spent?: string; includeShipping?: boolean } = {}) {
  const res = await t.graphql(apiKey, 'mutation($input: EarningRuleCreateInput!) { earningRuleCreate(input: $input) { earningRule { _id } userErrors { message } } }', {
    input: { type: 'place_order', name: 'Points per purchase', earnPoint: rule.earnPoint ?? 1, spent: rule.spent ?? '1.00', includeShipping: rule.includeShipping ?? false },
  });
  expect(res.data.earningRuleCreate.userErrors).toEqual([]);
}

const put = (orderId: string, body: unknown, apiKey = shop.apiKey, headers: Record<string, string> = {}) =>
  fetch(`${t.url}/rest-api/v1/orders/${encodeURIComponent(orderId)}`, {
    method: 'PUT',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${apiKey}`, ...headers },
    body: JSON.stringify(body),
  });
const getOrder = (orderId: string, apiKey = shop.apiKey) =>
  fetch(`${t.url}/rest-api/v1/orders/${encodeURIComponent(orderId)}`, { headers: { authorization: `Bearer ${apiKey}` } });

/** Two shirts at $20.00 and a mug at $10.50 ($50.50), shipping $5, tax $4.04. */
function orderBody(customerIdentifier: string, overrides: Record<string, unknown> = {}) {
  return {
    customerIdentifier,
    currency: 'USD',
    subtotal: '50.50',
    shipping: '5.00',
    tax: '4.04',
    total: '59.54',
    refunded: '0',
    status: 'paid',
    lineItems: [
      { productId: 'shirt', quantity: 2, price: '20.00', collectionIds: ['tops'] },
      { productId: 'mug', quantity: 1, price: '10.50' },
    ],
    ...overrides,
  };
}

async function customer(shopifyCustomerId: string) {
  return db().selectFrom('customers').selectAll().where('shop_id', '=', shop.shopId).where('shopify_customer_id', '=', shopifyCustomerId).executeTakeFirstOrThrow();
}

async function ledger(shopifyCustomerId: string) {
  const c = await customer(shopifyCustomerId);
  return db().selectFrom('activities').select(['type', 'setting_type', 'old_points', 'new_points']).where('customer_id', '=', c.id).orderBy('seq').execute();
}

beforeAll(async () => {
  t = await startTestApp();
  shop = await t.shop();
  await placeOrderRule(shop.apiKey);
});
afterAll(() => t?.stop());

describe('PUT /orders/:orderId', () => {
  it('records a paid order once, earns by the rule, and answers the same state with no change', async () => {
    await t.customer(shop.shopId, 'o-1');
    const first = await put('1001', orderBody('o-1'));
    expect(first.status).toBe(201);
    const { order } = await first.json();
    expect(order).toMatchObject({ orderId: '1001', status: 'paid', subtotal: '50.50', total: '59.54', pointsEarned: 50, pointsPending: 0, unrecoveredPoints: 0 });
    const again = await put('1001', orderBody('o-1'));
    expect(again.status).toBe(200);
    expect((await again.json()).message).toBe('Order unchanged');
    expect((await customer('o-1')).points).toBe(50);
    expect(await ledger('o-1')).toEqual([{ type: 'earn_points', setting_type: 'order', old_points: 0, new_points: 50 }]);
    expect((await (await getOrder('1001')).json()).order).toEqual(order);
    expect((await getOrder('nope')).status).toBe(404);
  });

  it('a pending order earns when paid; partial refunds take back the difference, a cancellation the rest', async () => {
    await t.customer(shop.shopId, 'o-2');
    expect((await (await put('2001', orderBody('o-2', { status: 'pending' }))).json()).order.pointsEarned).toBe(0);
    await put('2001', orderBody('o-2'));
    expect((await customer('o-2')).points).toBe(50);
    // The mug back by units: 40 points.
    const mugBack = orderBody('o-2', { status: 'partially_refunded', refunded: '10.50', lineItems: [{ productId: 'shirt', quantity: 2, price: '20.00' }, { productId: 'mug', quantity: 1, price: '10.50', refundedQuantity: 1 }] });
    expect((await (await put('2001', mugBack)).json()).order).toMatchObject({ pointsEarned: 40, pointsClawedBack: 10 });
    const cancelled = await (await put('2001', { ...mugBack, status: 'cancelled' })).json();
    expect(cancelled.order).toMatchObject({ pointsEarned: 0, pointsClawedBack: 50, unrecoveredPoints: 0 });
    expect((await customer('o-2')).points).toBe(0);
    expect((await ledger('o-2')).map((a) => [a.type, a.new_points])).toEqual([['earn_points', 50], ['clawback_points', 40], ['clawback_points', 0]]);
  });

  it('a refund after the points were spent stops the balance at 0 and records the shortfall', async () => {
    await t.customer(shop.shopId, 'o-3');
    await put('3001', orderBody('o-3'));
    await t.post('/rest-api/v1/points/substract', { customerIdentifier: 'o-3', amount: 45 }, shop.apiKey);
    const refunded = await (await put('3001', orderBody('o-3', { status: 'refunded', refunded: '59.54' }))).json();
    expect(refunded.order).toMatchObject({ pointsEarned: 0, pointsClawedBack: 50, unrecoveredPoints: 45 });
    expect((await customer('o-3')).points).toBe(0);
  });

  it('with pendingDays the points wait as pending; a refund before they are available lowers pending, not the balance', async () => {
    const pendingShop = await t.shop('Pending shop');
    await placeOrderRule(pendingShop.apiKey);
    await updateShopSettings(db(), pendingShop.shopId, { pendingDays: 14 });
    await t.customer(pendingShop.shopId, 'p-1', 5);
    const paid = await (await put('4001', orderBody('p-1'), pendingShop.apiKey)).json();
    expect(paid.order).toMatchObject({ pointsEarned: 50, pointsPending: 50 });
    const row = () => db().selectFrom('customers').select(['points', 'pending_points']).where('shop_id', '=', pendingShop.shopId).executeTakeFirstOrThrow();
    expect(await row()).toEqual({ points: 5, pending_points: 50 });
    const gql = await t.graphql(pendingShop.apiKey, '{ customer(identifier: "p-1") { points pendingPoints pendingEarns { edges { node { points availableAt } } } orders { edges { node { orderId pointsPending } } } } }');
    expect(gql.data.customer).toMatchObject({ points: 5, pendingPoints: 50, orders: { edges: [{ node: { orderId: '4001', pointsPending: 50 } }] } });
    const availableAt = new Date(gql.data.customer.pendingEarns.edges[0].node.availableAt).getTime();
    expect(Math.abs(availableAt - (Date.now() + 14 * 86_400_000))).toBeLessThan(60_000);
    const refunded = await (await put('4001', orderBody('p-1', { status: 'partially_refunded', refunded: '20.00' }), pendingShop.apiKey)).json();
    // 5,050 × (5,954 − 2,000) / 5,954 = 3,353.6 → 33 points.
    expect(refunded.order).toMatchObject({ pointsEarned: 33, pointsPending: 33, pointsClawedBack: 17, unrecoveredPoints: 0 });
    expect(await row()).toEqual({ points: 5, pending_points: 33 });
  });

  it('an order in another currency is stored and earns nothing, saying why', async () => {
    await t.customer(shop.shopId, 'o-4');
    const res = await put('5001', orderBody('o-4', { currency: 'EUR' }));
    expect((await res.json()).order).toMatchObject({ currency: 'EUR', pointsEarned: 0, earnNote: expect.stringContaining('EUR') });
  });

  it('Idempotency-Key works on the PUT as on every POST', async () => {
    await t.customer(shop.shopId, 'o-5');
    const first = await put('6001', orderBody('o-5'), shop.apiKey, { 'idempotency-key': 'order-6001' });
    const replay = await put('6001', orderBody('o-5'), shop.apiKey, { 'idempotency-key': 'order-6001' });
    expect(replay.headers.get('idempotent-replayed')).toBe('true');
    expect(await replay.json()).toEqual(await first.json());
    expect((await put('6001', orderBody('o-5', { status: 'cancelled' }), shop.apiKey, { 'idempotency-key': 'order-6001' })).status).toBe(422);
  });

  describe('bad input is a clear 4xx and changes nothing', () => {
    beforeAll(async () => {
      await t.customer(shop.shopId, 'bad-1');
      await t.customer(shop.shopId, 'bad-2');
      expect((await put('7001', orderBody('bad-1'))).status).toBe(201);
    });
    it.each<[string, string, Record<string, unknown>, number, string, string?]>([
      ['unknown customer', 'new-1', { customerIdentifier: 'nobody' }, 404, 'customer_not_found'],
      ['three decimals in USD', 'new-2', { subtotal: '50.505' }, 400, 'validation_error', 'subtotal'],
      ['a negative amount', 'new-3', { shipping: '-5.00' }, 400, 'validation_error', 'shipping'],
      ['a huge amount', 'new-4', { total: '1000000000000000000' }, 400, 'validation_error', 'total'],
      ['a float instead of a string', 'new-5', { total: 59.54 }, 400, 'validation_error', 'total'],
      ['an unknown currency', 'new-6', { currency: 'XYZ' }, 400, 'validation_error', 'currency'],
      ['refunded more than the total', 'new-7', { refunded: '60.00', status: 'partially_refunded' }, 422, 'refund_exceeds_total'],
      ['line items that do not add up', 'new-8', { subtotal: '49.00' }, 422, 'order_totals_mismatch'],
      ['an unknown status', 'new-9', { status: 'shipped' }, 400, 'validation_error', 'status'],
      ['more refunded units than sold', 'new-10', { lineItems: [{ productId: 'x', quantity: 1, price: '50.50', refundedQuantity: 2 }] }, 400, 'validation_error', 'lineItems.0.refundedQuantity'],
      ['an unknown field', 'new-11', { tip: '1.00' }, 400, 'validation_error'],
      ['a NUL character in a line', 'new-12', { lineItems: [{ productId: 'x', quantity: 1, price: '49.50' }, { productId: 'y\u0000', quantity: 1, price: '1.00' }] }, 400, 'validation_error', 'lineItems.1.productId'],
      ['a lone surrogate in a collection', 'new-13', { lineItems: [{ productId: 'x', collectionIds: ['ok', 'c\ud800'], quantity: 1, price: '50.50' }] }, 400, 'validation_error', 'lineItems.0.collectionIds.1'],
      ['status going backwards (cancelled → paid)', '7001', {}, 422, 'order_status_backwards'],
      ['the order moved to another customer', '7001', { customerIdentifier: 'bad-2', status: 'cancelled' }, 422, 'order_customer_changed'],
    ])('%s', async (_name, orderId, overrides, status, code, field) => {
      if (orderId === '7001' && code === 'order_status_backwards') expect((await put('7001', orderBody('bad-1', { status: 'cancelled' }))).status).toBe(200);
      const before = await db().selectFrom('orders').select(['order_id', 'state_hash', 'points_earned']).where('shop_id', '=', shop.shopId).orderBy('order_id').execute();
      const res = await put(orderId, orderBody('bad-1', overrides));
      expect(res.status).toBe(status);
      const body = await res.json();
      expect(body).toMatchObject({ success: false, error: code });
      if (field) expect(body.details.map((d: { path: string }) => d.path)).toContain(field);
      expect(await db().selectFrom('orders').select(['order_id', 'state_hash', 'points_earned']).where('shop_id', '=', shop.shopId).orderBy('order_id').execute()).toEqual(before);
    });
  });

  it('GraphQL orderUpsert and order mirror the REST face', async () => {
    await t.customer(shop.shopId, 'g-1');
    const mutation = `mutation($orderId: String!, $input: OrderInput!) { orderUpsert(orderId: $orderId, input: $input) { created changed order { orderId total pointsEarned status } userErrors { code field message } } }`;
    const created = await t.graphql(shop.apiKey, mutation, { orderId: 'g-1001', input: orderBody('g-1') });
    expect(created.data.orderUpsert).toMatchObject({ created: true, changed: true, order: { orderId: 'g-1001', total: '59.54', pointsEarned: 50, status: 'paid' }, userErrors: [] });
    const bad = await t.graphql(shop.apiKey, mutation, { orderId: 'g-1001', input: orderBody('g-1', { status: 'pending' }) });
    expect(bad.data.orderUpsert.userErrors).toEqual([expect.objectContaining({ code: 'order_status_backwards', field: ['input', 'status'] })]);
    const read = await t.graphql(shop.apiKey, '{ order(orderId: "g-1001") { pointsEarned customer } missing: order(orderId: "none") { _id } }');
    expect(read.data).toMatchObject({ order: { pointsEarned: 50 }, missing: null });
  });

  it('announces orders/created and points/earned', async () => {
    await t.customer(shop.shopId, 'e-1');
    await put('8001', orderBody('e-1'));
    const events = await db().selectFrom('outbox_events').select(['type', 'data']).where('shop_id', '=', shop.shopId).orderBy('seq', 'desc').limit(2).execute();
    expect(events.map((e) => e.type).sort()).toEqual(['orders/created', 'points/earned']);
    const earned = events.find((e) => e.type === 'points/earned')!.data as { type: string; newPoints: number };
    expect(earned).toMatchObject({ type: 'earn_points', newPoints: 50 });
  });

  it('the events of a new order name its customer and carry the ledger entry and the order as the API shows them', async () => {
    await t.customer(shop.shopId, 'e-2', 7);
    const { order } = await (await put('8002', orderBody('e-2'))).json();
    const c = await customer('e-2');
    const events = await db().selectFrom('outbox_events').select(['type', 'data']).where('shop_id', '=', shop.shopId).orderBy('seq', 'desc').limit(2).execute();
    const [created, earned] = events as Array<{ type: string; data: Record<string, unknown> }>;
    expect(earned).toMatchObject({ type: 'points/earned', data: { customer: c.id, oldPoints: 7, newPoints: 57, settingType: 'order', description: 'order 8002' } });
    expect(created).toEqual({ type: 'orders/created', data: order });
    expect(order).toMatchObject({ customer: c.id, orderId: '8002', pointsEarned: 50 });
    const activity = await db().selectFrom('activities').selectAll().where('id', '=', earned!.data._id as string).executeTakeFirstOrThrow();
    expect(activity).toMatchObject({ customer_id: c.id, old_points: 7, new_points: 57 });
    // Exactly the entry as the API shows it (the statement builds the event from the row it wrote).
    expect(earned!.data).toEqual(JSON.parse(JSON.stringify(toActivity(activity))));

    // An order that earns nothing (another currency, so a note), with a time and a refund: its only event is the order as answered.
    const other = await (await put('8003', orderBody('e-2', { currency: 'EUR', refunded: '1.50', status: 'partially_refunded', processedAt: '2026-11-20T10:00:00+02:00' }))).json();
    const [last] = await db().selectFrom('outbox_events').select(['type', 'data']).where('shop_id', '=', shop.shopId).orderBy('seq', 'desc').limit(1).execute();
    expect(last).toEqual({ type: 'orders/created', data: other.order });
    expect(other.order).toMatchObject({ processedAt: '2026-11-20T08:00:00.000Z', refunded: '1.50', pointsEarned: 0, earnNote: expect.stringContaining('EUR') });
  });
});

// Issue 31, item 12: what docs/api.md says of the edges an independent model found silent.
describe('the edges docs/api.md spells out', () => {
  const shirtBack = [
    { productId: 'shirt', quantity: 2, price: '20.00', collectionIds: ['tops'], refundedQuantity: 1 },
    { productId: 'mug', quantity: 1, price: '10.50' },
  ];

  it('a shortfall is not a debt: an edit that raises the order afterwards is credited in full', async () => {
    await t.customer(shop.shopId, 'sf-1');
    expect((await (await put('SF-1', orderBody('sf-1'))).json()).order.pointsEarned).toBe(50);
    expect((await t.post('/rest-api/v1/points/substract', { customerIdentifier: 'sf-1', amount: 45 }, shop.apiKey)).status).toBe(200);
    // A shirt back: 30 points now; 5 come back from the balance, 15 were spent.
    const refunded = await (await put('SF-1', orderBody('sf-1', { status: 'partially_refunded', refunded: '20.00', lineItems: shirtBack }))).json();
    expect(refunded.order).toMatchObject({ pointsEarned: 30, pointsClawedBack: 20, unrecoveredPoints: 15 });
    expect((await customer('sf-1')).points).toBe(0);
    // An edit adds a $10.00 cap: 40 points, so 10 more, all of them credited.
    const edited = orderBody('sf-1', {
      status: 'partially_refunded',
      refunded: '20.00',
      subtotal: '60.50',
      total: '69.54',
      lineItems: [...shirtBack, { productId: 'cap', quantity: 1, price: '10.00' }],
    });
    const raised = await (await put('SF-1', edited)).json();
    expect(raised.order).toMatchObject({ pointsEarned: 40, pointsClawedBack: 20, unrecoveredPoints: 15 });
    expect((await customer('sf-1')).points).toBe(10);
    expect((await ledger('sf-1')).map((a) => [a.type, a.new_points])).toEqual([['earn_points', 50], ['subtract_points', 5], ['clawback_points', 0], ['earn_points', 10]]);
  });

  // Refunded amounts never go down, so each state carries the larger of the two.
  const refundedOf: Record<string, number> = { pending: 0, paid: 0, partially_refunded: 10, refunded: 59.54, cancelled: 0 };
  it.each<[string, string, number]>([
    ['pending', 'paid', 200],
    ['pending', 'cancelled', 200],
    ['paid', 'paid', 200],
    ['paid', 'refunded', 200],
    ['partially_refunded', 'partially_refunded', 200],
    ['partially_refunded', 'refunded', 200],
    ['partially_refunded', 'cancelled', 200],
    ['refunded', 'cancelled', 200],
    ['cancelled', 'refunded', 200],
    ['paid', 'pending', 422],
    ['partially_refunded', 'paid', 422],
    ['refunded', 'partially_refunded', 422],
    ['cancelled', 'paid', 422],
  ])('status %s → %s: %i', async (from, to, status) => {
    const id = `ST-${from}-${to}`;
    await t.customer(shop.shopId, 'st-1');
    const state = (s: string, refunded: number, edit = false) =>
      orderBody('st-1', { status: s, refunded: refunded.toFixed(2), ...(edit ? { shipping: '6.00', total: '60.54' } : {}) });
    expect((await put(id, state(from, refundedOf[from]!))).status).toBe(201);
    // The second state always differs from the first (an edit of the shipping when the status stays).
    const res = await put(id, state(to, Math.max(refundedOf[from]!, refundedOf[to]!), true));
    expect(res.status).toBe(status);
    const body = await res.json();
    if (status === 422) expect(body).toMatchObject({ error: 'order_status_backwards' });
    else expect(body).toMatchObject({ message: 'Order updated', order: { status: to } });
  });

  it('total is not checked against subtotal + shipping + tax; it prorates money-only refunds', async () => {
    await t.customer(shop.shopId, 'tot-1');
    // Tax included in the prices: the $4.04 is inside the $50.50 subtotal, so the total is 55.50.
    const included = await put('TOT-1', orderBody('tot-1', { total: '55.50' }));
    expect(included.status).toBe(201);
    expect((await included.json()).order).toMatchObject({ total: '55.50', pointsEarned: 50 });
    // A tip of $2.00 on top of the sum.
    expect((await put('TOT-2', orderBody('tot-1', { total: '61.54' }))).status).toBe(201);
    // $5.55 of the 55.50 back as money: the lines keep 50.50 × (55.50 − 5.55) / 55.50 = 45.45.
    const refund = await (await put('TOT-1', orderBody('tot-1', { total: '55.50', refunded: '5.55', status: 'partially_refunded' }))).json();
    expect(refund.order).toMatchObject({ pointsEarned: 45, pointsClawedBack: 5 });
  });

  it('sourceUpdatedAt: an older state changes nothing, even a move back; a state without it applies and keeps the stored time', async () => {
    await t.customer(shop.shopId, 'src-1');
    const at = (time?: string) => (time ? { sourceUpdatedAt: time } : {});
    const stored = async () => (await db().selectFrom('orders').select(['status', 'refunded_minor', 'source_updated_at']).where('shop_id', '=', shop.shopId).where('order_id', '=', 'SRC-1').executeTakeFirstOrThrow());
    expect((await put('SRC-1', orderBody('src-1', at('2026-11-20T10:00:00Z')))).status).toBe(201);
    // Older: unchanged (200), whether it would be a refund or a move back to pending.
    for (const older of [{ status: 'partially_refunded', refunded: '10.00' }, { status: 'pending' }]) {
      const res = await put('SRC-1', orderBody('src-1', { ...older, ...at('2026-11-20T09:00:00Z') }));
      expect(res.status).toBe(200);
      expect((await res.json()).message).toBe('Order unchanged');
    }
    // Without a time: applied, and the stored time stays.
    const untimed = await put('SRC-1', orderBody('src-1', { status: 'partially_refunded', refunded: '10.00' }));
    expect((await untimed.json()).message).toBe('Order updated');
    expect(await stored()).toEqual({ status: 'partially_refunded', refunded_minor: 1000, source_updated_at: new Date('2026-11-20T10:00:00Z') });
    // Still compared with it: older changes nothing, the same time applies.
    expect((await (await put('SRC-1', orderBody('src-1', { status: 'refunded', refunded: '59.54', ...at('2026-11-20T09:30:00Z') }))).json()).message).toBe('Order unchanged');
    expect((await (await put('SRC-1', orderBody('src-1', { status: 'refunded', refunded: '59.54', ...at('2026-11-20T10:00:00Z') }))).json()).message).toBe('Order updated');
    expect((await stored()).status).toBe('refunded');
  });
});

// Issue 31, item 9: the value of refunded units stays exact (a third of a 1.00 line is 0.333…)
// until the eligible amount is floored, once, whichever path writes the state.
describe('refunded units are exact end to end, in USD, JPY and KWD', () => {
  it.each([
    ['USD', '0.34', '0.02', '1.00', '3.00'],
    ['JPY', '34', '2', '100', '300'],
    ['KWD', '0.334', '0.002', '1.000', '3.000'],
  ])('%s: three lines of 3 × (%s − %s) earn 3 per %s; one unit of each back keeps 2', async (currency, price, discount, one, total) => {
    const s = await t.shop(`Exact ${currency}`);
    await updateShopSettings(db(), s.shopId, { currency });
    await placeOrderRule(s.apiKey, { spent: one });
    await t.customer(s.shopId, `exact-${currency}`);
    const state = (refundedQuantity: number) => ({
      customerIdentifier: `exact-${currency}`,
      currency,
      subtotal: total,
      total,
      refunded: refundedQuantity ? one : '0',
      status: refundedQuantity ? 'partially_refunded' : 'paid',
      lineItems: ['a', 'b', 'c'].map((productId) => ({ productId, quantity: 3, price, discount, refundedQuantity })),
    });
    // Paid, then refunded: the locked path takes back 1 point, not 2.
    const paid = await put('X-1', state(0), s.apiKey);
    expect(paid.status).toBe(201);
    expect((await paid.json()).order).toMatchObject({ pointsEarned: 3 });
    const refunded = await put('X-1', state(1), s.apiKey);
    expect(refunded.status).toBe(200);
    expect((await refunded.json()).order).toMatchObject({ pointsEarned: 2, pointsClawedBack: 1, unrecoveredPoints: 0 });
    // A first state that carries the refund already (the one-statement path) earns the same 2.
    const late = await put('X-2', state(1), s.apiKey);
    expect(late.status).toBe(201);
    expect((await late.json()).order).toMatchObject({ pointsEarned: 2, pointsClawedBack: 0 });
    const c = await db().selectFrom('customers').select(['id', 'points']).where('shop_id', '=', s.shopId).executeTakeFirstOrThrow();
    expect(c.points).toBe(4);
    const entries = await db().selectFrom('activities').select(['type', 'new_points']).where('customer_id', '=', c.id).orderBy('seq').execute();
    expect(entries.map((a) => [a.type, a.new_points])).toEqual([['earn_points', 3], ['clawback_points', 2], ['earn_points', 4]]);
  });
});

/** A shop of its own, with a customer and a rule of `earnPoint` per $1, on `a`. */
async function programShop(a: TestApp, name: string) {
  const s = await a.shop(name);
  await a.customer(s.shopId, 'p-1');
  const created = await a.graphql(s.apiKey, 'mutation($input: EarningRuleCreateInput!) { earningRuleCreate(input: $input) { earningRule { _id } } }', {
    input: { type: 'place_order', name: 'Per purchase', earnPoint: 1, spent: '1.00' },
  });
  return { ...s, ruleId: created.data.earningRuleCreate.earningRule._id as string };
}

const putOn = (a: TestApp, apiKey: string, orderId: string, body: unknown) =>
  fetch(`${a.url}/rest-api/v1/orders/${orderId}`, { method: 'PUT', headers: { 'content-type': 'application/json', authorization: `Bearer ${apiKey}` }, body: JSON.stringify(body) });

/** Changes the rule to 2 points per $1 and sets pendingDays 0 then 3, PUTting a new order on `b` after each change made on `a`. */
async function earnsByTheProgramOfTheMoment(a: TestApp, b: TestApp) {
  const s = await programShop(a, 'Program of the moment');
  const earned = async (orderId: string) => (await (await putOn(b, s.apiKey, orderId, orderBody('p-1'))).json()).order;
  expect(await earned('m-1')).toMatchObject({ pointsEarned: 50, pointsPending: 0 });
  const updated = await a.graphql(s.apiKey, 'mutation($input: EarningRuleUpdateInput!) { earningRuleUpdate(input: $input) { userErrors { message } } }', { input: { id: s.ruleId, earnPoint: 2 } });
  expect(updated.data.earningRuleUpdate.userErrors).toEqual([]);
  expect(await earned('m-2')).toMatchObject({ pointsEarned: 100, pointsPending: 0 });
  await updateShopSettings(a.app.database.db, s.shopId, { pendingDays: 3 });
  expect(await earned('m-3')).toMatchObject({ pointsEarned: 100, pointsPending: 100 });
  await a.graphql(s.apiKey, 'mutation($id: ID!) { earningRuleDelete(id: $id) { deletedEarningRuleId } }', { id: s.ruleId });
  expect(await earned('m-4')).toMatchObject({ pointsEarned: 0, earnNote: 'no place_order rule was active when the order was paid' });
}

describe('a new order earns by the program as it is when the order arrives', () => {
  it('after a rule or a setting changed on this instance', () => earnsByTheProgramOfTheMoment(t, t));

  it.runIf(onPostgres)('after a rule or a setting changed on another instance', async () => {
    const pg = await isolatedPostgresUrl();
    const a = await startTestApp({ DATABASE_URL: pg.url });
    const b = await startTestApp({ DATABASE_URL: pg.url });
    try {
      await earnsByTheProgramOfTheMoment(a, b);
    } finally {
      await a.stop();
      await b.stop();
      await pg.drop();
    }
  });
});
