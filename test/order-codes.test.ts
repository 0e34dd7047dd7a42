import { createHmac, randomUUID } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inTransaction } from '../src/db/transaction.js';
import { endCode, lockCode, returnCodePoints, toDiscountCode } from '../src/domain/codes/index.js';
import { createPointsRedemption } from '../src/domain/rewards/redemptions.js';
import { updateShopSettings } from '../src/domain/settings/shop-settings.js';
import { SHOPIFY_WEBHOOKS_PATH } from '../src/rest/shopify-webhooks.js';
import { startTestApp, type TestApp } from './helpers.js';

// Orders carry the codes they used (issue 33, item 2): an issued code becomes used by the order
// that first carries it, once; refunds never bring it back, and return its points only where the
// shop says so, once.

let t: TestApp;
let shop: { shopId: string; apiKey: string };
let reward: { _id: string };

const db = () => t.app.database.db;

const put = (orderId: string, body: unknown) =>
  fetch(`${t.url}/rest-api/v1/orders/${encodeURIComponent(orderId)}`, {
    method: 'PUT',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${shop.apiKey}` },
    body: JSON.stringify(body),
  });

/** A shirt at $20.00 with $5.00 off by the codes. */
function orderBody(customerIdentifier: string, discountCodes?: Array<{ code: string; amount: string }>, overrides: Record<string, unknown> = {}) {
  return {
    customerIdentifier,
    currency: 'USD',
    subtotal: '15.00',
    total: '15.00',
    status: 'paid',
    lineItems: [{ productId: 'shirt', quantity: 1, price: '20.00', discount: '5.00' }],
    ...(discountCodes ? { discountCodes } : {}),
    ...overrides,
  };
}

/** A code issued to the customer by a real redemption (100 points). */
async function issue(shopifyCustomerId: string): Promise<string> {
  const res = await t.post('/rest-api/v1/pointsRedemptions', { customerIdentifier: shopifyCustomerId, pointsAmount: 100, rewardId: reward._id }, shop.apiKey);
  expect(res.status).toBe(200);
  return (await res.json()).discountCode;
}

const codeRow = (code: string) => db().selectFrom('discount_codes').selectAll().where('shop_id', '=', shop.shopId).where('code', '=', code).executeTakeFirstOrThrow();

async function eventsOf(type: string, code: string) {
  const rows = await db().selectFrom('outbox_events').select(['data']).where('shop_id', '=', shop.shopId).where('type', '=', type).execute();
  return rows.filter((r) => (r.data as { code?: string }).code === code);
}

/** The customer's balance, and their ledger (type and delta), oldest first; each entry starts where the last ended. */
async function ledgerOf(shopifyCustomerId: string) {
  const c = await db().selectFrom('customers').selectAll().where('shop_id', '=', shop.shopId).where('shopify_customer_id', '=', shopifyCustomerId).executeTakeFirstOrThrow();
  const entries = await db().selectFrom('activities').selectAll().where('customer_id', '=', c.id).orderBy('seq').execute();
  entries.forEach((e, i) => expect(e.old_points).toBe(i === 0 ? 0 : entries[i - 1]!.new_points));
  expect(c.points).toBe(entries.at(-1)?.new_points ?? 0);
  return { points: c.points, entries: entries.map((e) => [e.type, e.new_points - e.old_points]) };
}

const returnOnRefund = (on: boolean) => updateShopSettings(db(), shop.shopId, { returnCodePointsOnRefund: on });

/** `fn` with the shop's returnCodePointsOnRefund on; off again after. */
async function withReturnOnRefund(fn: () => Promise<void>) {
  await returnOnRefund(true);
  try {
    await fn();
  } finally {
    await returnOnRefund(false);
  }
}

beforeAll(async () => {
  t = await startTestApp({ WORKER: 'off' });
  shop = await t.shop('Codes at checkout');
  reward = (await createPointsRedemption(db(), shop.shopId, { name: '$5 off', type: 'amount', discountPrefix: 'OC-', rewardValue: 100, discountValue: 5 })).pointsRedemption;
});
afterAll(() => t?.stop());

describe('PUT /orders with discountCodes', () => {
  it('marks an issued code used by the order, once; the order keeps its codes; the same PUT again changes nothing', async () => {
    await t.customer(shop.shopId, 'c-1', 1000);
    const code = await issue('c-1');
    const res = await put('O-1', orderBody('c-1', [{ code, amount: '5' }]));
    expect(res.status).toBe(201);
    const { order } = await res.json();
    expect(order.discountCodes).toEqual([{ code, amount: '5.00' }]);
    const used = await codeRow(code);
    expect(used).toMatchObject({ status: 'used', order_id: 'O-1', other_customer: false });
    expect(used.used_at).toBeInstanceOf(Date);

    const again = await put('O-1', orderBody('c-1', [{ code, amount: '5.00' }]));
    expect(again.status).toBe(200);
    expect((await again.json()).message).toBe('Order unchanged');
    expect(await codeRow(code)).toEqual(used);
    const events = await eventsOf('redemptions/used', code);
    expect(events).toHaveLength(1);
    // Built in SQL by the statement that wrote the order: the code as the API shows it.
    expect(events[0]!.data).toEqual(JSON.parse(JSON.stringify(toDiscountCode(used))));
    expect(events[0]!.data).toMatchObject({ code, status: 'used', orderId: 'O-1', usedByOtherCustomer: false });

    const got = await (await fetch(`${t.url}/rest-api/v1/orders/O-1`, { headers: { authorization: `Bearer ${shop.apiKey}` } })).json();
    expect(got.order.discountCodes).toEqual([{ code, amount: '5.00' }]);
    const created = await db().selectFrom('outbox_events').select('data').where('shop_id', '=', shop.shopId).where('type', '=', 'orders/created').execute();
    expect(created.map((e) => e.data).find((d: any) => d.orderId === 'O-1')).toMatchObject({ discountCodes: [{ code, amount: '5.00' }] });
  });

  it('through GraphQL orderUpsert: used, shown on the Order; again, unchanged', async () => {
    await t.customer(shop.shopId, 'c-2', 1000);
    const code = await issue('c-2');
    const mutation = `mutation($id: String!, $input: OrderInput!) { orderUpsert(orderId: $id, input: $input) {
      order { orderId discountCodes { code amount } } created changed userErrors { code message } } }`;
    const first = await t.graphql(shop.apiKey, mutation, { id: 'G-1', input: orderBody('c-2', [{ code, amount: '5.00' }]) });
    expect(first.data.orderUpsert).toEqual({ order: { orderId: 'G-1', discountCodes: [{ code, amount: '5.00' }] }, created: true, changed: true, userErrors: [] });
    expect(await codeRow(code)).toMatchObject({ status: 'used', order_id: 'G-1' });
    const second = await t.graphql(shop.apiKey, mutation, { id: 'G-1', input: orderBody('c-2', [{ code, amount: '5.00' }]) });
    expect(second.data.orderUpsert).toMatchObject({ created: false, changed: false, userErrors: [] });
    expect(await eventsOf('redemptions/used', code)).toHaveLength(1);
    const read = await t.graphql(shop.apiKey, '{ order(orderId: "G-1") { discountCodes { code amount } } }');
    expect(read.data.order.discountCodes).toEqual([{ code, amount: '5.00' }]);
  });

  it('another customer\'s code is used all the same and flagged; an unknown code is kept on the order and ignored', async () => {
    await t.customer(shop.shopId, 'c-3', 1000);
    await t.customer(shop.shopId, 'c-4');
    const code = await issue('c-3');
    const res = await put('O-3', orderBody('c-4', [{ code: 'NOT-A-CODE', amount: '1.00' }, { code, amount: '4.00' }]));
    expect(res.status).toBe(201);
    expect((await res.json()).order.discountCodes).toEqual([{ code: 'NOT-A-CODE', amount: '1.00' }, { code, amount: '4.00' }]);
    expect(await codeRow(code)).toMatchObject({ status: 'used', order_id: 'O-3', other_customer: true });
    expect((await eventsOf('redemptions/used', code))[0]!.data).toMatchObject({ usedByOtherCustomer: true });
    expect(await db().selectFrom('discount_codes').select('id').where('code', '=', 'NOT-A-CODE').execute()).toEqual([]);
  });

  it('a later PUT that adds a code uses it, whatever the status; a code used by another order, expired or cancelled stays so', async () => {
    await t.customer(shop.shopId, 'c-5', 1000);
    const [later, byOther, expired, cancelled] = [await issue('c-5'), await issue('c-5'), await issue('c-5'), await issue('c-5')];
    // Ended directly, as the scheduler (at the code's expiresAt) and a cancellation do.
    await inTransaction(db(), async (trx) => {
      await trx.updateTable('discount_codes').set({ expires_at: new Date(Date.now() - 60_000) }).where('code', '=', expired).execute();
      await endCode(trx, (await lockCode(trx, shop.shopId, { code: expired }))!, { status: 'expired' });
      await endCode(trx, (await lockCode(trx, shop.shopId, { code: cancelled }))!, { status: 'cancelled', at: new Date() });
    });
    expect((await put('O-5a', orderBody('c-5', [{ code: byOther, amount: '5.00' }]))).status).toBe(201);
    const before = { byOther: await codeRow(byOther), expired: await codeRow(expired), cancelled: await codeRow(cancelled) };

    // Pending (unpaid) at first, with no code; then the codes arrive with the same pending state.
    expect((await put('O-5', orderBody('c-5', undefined, { status: 'pending' }))).status).toBe(201);
    const codes = [later, byOther, expired, cancelled].map((code) => ({ code, amount: '1.25' }));
    const res = await put('O-5', orderBody('c-5', codes, { status: 'pending' }));
    expect(res.status).toBe(200);
    expect((await res.json())).toMatchObject({ message: 'Order updated', order: { discountCodes: codes } });
    expect(await codeRow(later)).toMatchObject({ status: 'used', order_id: 'O-5' });
    expect((await eventsOf('redemptions/used', later))[0]!.data).toEqual(JSON.parse(JSON.stringify(toDiscountCode(await codeRow(later)))));
    expect({ byOther: await codeRow(byOther), expired: await codeRow(expired), cancelled: await codeRow(cancelled) }).toEqual(before);
    expect(before).toMatchObject({ byOther: { status: 'used', order_id: 'O-5a' }, expired: { status: 'expired', order_id: null }, cancelled: { status: 'cancelled', order_id: null } });

    // Paid later, with the codes left out: the order keeps them; nothing moves.
    const paid = await put('O-5', orderBody('c-5', undefined));
    expect((await paid.json()).order.discountCodes).toEqual(codes);
    expect(await eventsOf('redemptions/used', later)).toHaveLength(1);
    expect(await eventsOf('redemptions/used', byOther)).toHaveLength(1);
  });

  it('refuses bad codes as 400 with their paths: too many, too long, a float amount or too many decimals', async () => {
    await t.customer(shop.shopId, 'c-6');
    const tooMany = Array.from({ length: 51 }, (_, i) => ({ code: `X-${i}`, amount: '0.10' }));
    for (const [codes, path] of [
      [tooMany, 'discountCodes'],
      [[{ code: 'x'.repeat(256), amount: '1.00' }], 'discountCodes.0.code'],
      [[{ code: 'A', amount: 1 }], 'discountCodes.0.amount'],
      [[{ code: 'A', amount: '1.001' }], 'discountCodes.0.amount'],
      [[{ code: '', amount: '1.00' }], 'discountCodes.0.code'],
    ] as const) {
      const res = await put('O-6', orderBody('c-6', codes as never));
      expect(res.status).toBe(400);
      const body = await res.json();
      expect(body.success).toBe(false);
      expect(JSON.stringify(body)).toContain(path);
    }
    expect((await put('O-6', orderBody('c-6', Array.from({ length: 50 }, (_, i) => ({ code: `X-${i}`, amount: '0.10' }))))).status).toBe(201);
  });
});

describe('refunds and cancellations', () => {
  it('with returnCodePointsOnRefund on, the order becoming refunded gives its codes\' points back once: a second refund PUT and a cancel after change nothing', () =>
    withReturnOnRefund(async () => {
      await t.customer(shop.shopId, 'r-1', 1000);
      const code = await issue('r-1');
      expect((await put('R-1', orderBody('r-1', [{ code, amount: '5.00' }]))).status).toBe(201);
      const refunded = orderBody('r-1', [{ code, amount: '5.00' }], { status: 'refunded', refunded: '15.00' });
      expect((await put('R-1', refunded)).status).toBe(200);
      expect((await (await put('R-1', refunded)).json()).message).toBe('Order unchanged');
      expect((await put('R-1', { ...refunded, status: 'cancelled' })).status).toBe(200);
      expect(await ledgerOf('r-1')).toEqual({ points: 1000, entries: [['update_points', 1000], ['redeem_points', -100], ['refund_redemption', 100]] });
      expect(await codeRow(code)).toMatchObject({ status: 'used', order_id: 'R-1' });
      expect((await codeRow(code)).returned_activity_id).not.toBeNull();
      expect(await eventsOf('redemptions/used', code)).toHaveLength(1);
      const refundedEvents = await db().selectFrom('outbox_events').select('data').where('shop_id', '=', shop.shopId).where('type', '=', 'points/refunded').execute();
      expect(refundedEvents.filter((e) => (e.data as { description?: string }).description === 'Order R-1 refunded')).toHaveLength(1);
    }));

  it('racing refund and cancel PUTs of one order give the points back once', () =>
    withReturnOnRefund(async () => {
      await t.customer(shop.shopId, 'r-2', 1000);
      const codes = [await issue('r-2'), await issue('r-2')].map((code) => ({ code, amount: '2.50' }));
      expect((await put('R-2', orderBody('r-2', codes))).status).toBe(201);
      const results = await Promise.all(
        Array.from({ length: 30 }, (_, i) => put('R-2', orderBody('r-2', codes, i % 2 ? { status: 'refunded', refunded: '15.00' } : { status: 'cancelled' }))),
      );
      // A cancelled order cannot become refunded and back: some PUTs are refused, none is a 500.
      expect(results.every((r) => r.status === 200 || r.status === 422)).toBe(true);
      expect(await ledgerOf('r-2')).toEqual({ points: 1000, entries: [['update_points', 1000], ['redeem_points', -100], ['redeem_points', -100], ['refund_redemption', 100], ['refund_redemption', 100]] });
    }));

  it('an order first recorded cancelled with a code uses it and, with the setting on, gives its points back', () =>
    withReturnOnRefund(async () => {
      await t.customer(shop.shopId, 'r-3', 1000);
      const code = await issue('r-3');
      expect((await put('R-3', orderBody('r-3', [{ code, amount: '5.00' }], { status: 'cancelled' }))).status).toBe(201);
      expect(await codeRow(code)).toMatchObject({ status: 'used', order_id: 'R-3' });
      expect(await ledgerOf('r-3')).toEqual({ points: 1000, entries: [['update_points', 1000], ['redeem_points', -100], ['refund_redemption', 100]] });
    }));

  it('with the setting off, a refund returns nothing and the code stays used', async () => {
    await t.customer(shop.shopId, 'r-4', 1000);
    const code = await issue('r-4');
    expect((await put('R-4', orderBody('r-4', [{ code, amount: '5.00' }]))).status).toBe(201);
    expect((await put('R-4', orderBody('r-4', [{ code, amount: '5.00' }], { status: 'refunded', refunded: '15.00' }))).status).toBe(200);
    expect(await codeRow(code)).toMatchObject({ status: 'used', order_id: 'R-4', returned_activity_id: null });
    expect(await ledgerOf('r-4')).toEqual({ points: 900, entries: [['update_points', 1000], ['redeem_points', -100]] });
  });
});

describe('racing orders', () => {
  it('50 concurrent PUTs of different orders naming one code: all accepted, one uses it, one event', async () => {
    await t.customer(shop.shopId, 'x-1', 1000);
    const code = await issue('x-1');
    const ids = Array.from({ length: 50 }, (_, i) => `X-${i}`);
    const results = await Promise.all(ids.map((id, i) => put(id, orderBody(i % 2 ? 'x-1' : 'c-1', [{ code, amount: '5.00' }]))));
    expect(results.map((r) => r.status)).toEqual(ids.map(() => 201));
    const row = await codeRow(code);
    expect(row.status).toBe('used');
    expect(ids).toContain(row.order_id);
    expect(row.other_customer).toBe(Number(row.order_id!.slice(2)) % 2 === 0);
    expect(await eventsOf('redemptions/used', code)).toHaveLength(1);
    const orders = await db().selectFrom('orders').select('discount_codes').where('shop_id', '=', shop.shopId).where('order_id', 'in', ids).execute();
    expect(orders.every((o) => o.discount_codes[0]?.code === code)).toBe(true);
    expect(await ledgerOf('x-1')).toEqual({ points: 900, entries: [['update_points', 1000], ['redeem_points', -100]] });
  });
});

describe('racing a cancellation', () => {
  it('orders naming a code and its cancellation that gives the points back (code, then customer) never deadlock: one wins, the ledger exact', async () => {
    for (let round = 0; round < 5; round++) {
      const customer = `k-${round}`;
      await t.customer(shop.shopId, customer, 1000);
      const code = await issue(customer);
      // A cancellation as the shop's will be: the code locked, ended, then its points given back (the customer locked).
      const cancel = () =>
        inTransaction(db(), async (trx) => {
          const { changed, row } = await endCode(trx, (await lockCode(trx, shop.shopId, { code }))!, { status: 'cancelled', at: new Date() });
          if (changed) await returnCodePoints(trx, row, 'cancelled');
          return changed;
        });
      const results = await Promise.all([
        ...Array.from({ length: 10 }, (_, i) => put(`K-${round}-${i}`, orderBody(customer, [{ code, amount: '5.00' }])).then((r) => r.status)),
        cancel().then((changed) => (changed ? 'cancelled' : 'late')),
      ]);
      expect(results.slice(0, 10)).toEqual(Array(10).fill(201));
      const row = await codeRow(code);
      expect(results[10]).toBe(row.status === 'cancelled' ? 'cancelled' : 'late');
      expect(await ledgerOf(customer)).toEqual(
        row.status === 'cancelled'
          ? { points: 1000, entries: [['update_points', 1000], ['redeem_points', -100], ['refund_redemption', 100]] }
          : { points: 900, entries: [['update_points', 1000], ['redeem_points', -100]] },
      );
    }
  });
});

describe('the Shopify connector', () => {
  it('an orders/paid body with discount_codes uses the code it names', async () => {
    const secret = 'shpss_codes_secret';
    const domain = `codes-${randomUUID().slice(0, 8)}.myshopify.com`;
    const connected = await t.graphql(shop.apiKey, 'mutation($i: ShopifySettingsInput!) { shopifySettingsUpdate(input: $i) { userErrors { message } } }', { i: { shopDomain: domain, webhookSecret: secret } });
    expect(connected.data.shopifySettingsUpdate.userErrors).toEqual([]);
    // Shopify's documented sample (a voided test order), paid, with a code of its customer: edited as
    // text, so its 18-digit ids keep every digit.
    const sample = await readFile(new URL('./fixtures/shopify/orders-paid.json', import.meta.url), 'utf8');
    const customerId = /"customer": \{\s*"id": (\d+)/.exec(sample)![1]!;
    const orderId = /^ {2}"id": (\d+)/m.exec(sample)![1]!;
    await t.customer(shop.shopId, customerId, 1000);
    const code = await issue(customerId);
    const raw = sample
      .replace('"discount_codes": []', `"discount_codes": [{ "code": "${code}", "amount": "10.00", "type": "fixed_amount" }]`)
      .replace('"financial_status": "voided"', '"financial_status": "paid"')
      .replace(/"cancelled_at": "[^"]*"/, '"cancelled_at": null');
    const res = await fetch(`${t.url}${SHOPIFY_WEBHOOKS_PATH}`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        'x-shopify-topic': 'orders/paid',
        'x-shopify-hmac-sha256': createHmac('sha256', secret).update(raw).digest('base64'),
        'x-shopify-shop-domain': domain,
        'x-shopify-webhook-id': randomUUID(),
        'x-shopify-triggered-at': new Date().toISOString(),
      },
      body: raw,
    });
    expect(res.status).toBe(200);
    await t.app.scheduler.runDue();
    expect(await codeRow(code)).toMatchObject({ status: 'used', order_id: orderId, other_customer: false });
    const order = await (await fetch(`${t.url}/rest-api/v1/orders/${orderId}`, { headers: { authorization: `Bearer ${shop.apiKey}` } })).json();
    expect(order.order).toMatchObject({ status: 'paid', discountCodes: [{ code, amount: '10.00' }] });
  });
});
