import { randomBytes, randomUUID } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { purgeProcessedShopifyWebhooks } from '../src/domain/shopify/shopify-connector.js';
import { SHOPIFY_WEBHOOKS_PATH } from '../src/rest/shopify-webhooks.js';
import { isolatedPostgresUrl, onPostgres, startTestApp, type TestApp } from './helpers.js';
import { until } from './live-helpers.js';
import { deliverShopifyWebhook, type ShopifyDeliveryOptions } from './support/shopify-webhooks.js';

// Payloads in the shapes of Shopify's Admin REST webhooks (Order, Refund, Customer): numeric ids,
// money as strings with *_set twins, refunds with refund_line_items and transactions.

const SECRET = 'shpss_test_secret_0123456789';
const HOUR = 3_600_000;

type Line = { id: number; product_id: number | null; quantity: number; price: string; discount?: string };

function shopifyOrder(o: {
  id: number;
  customer?: { id: number; email: string } | null;
  lines: Line[];
  financial_status?: string;
  updated_at: string;
  cancelled_at?: string | null;
  refunds?: unknown[];
  shipping?: string;
  tax?: string;
}) {
  const subtotal = o.lines.reduce((sum, l) => sum + Number(l.price) * l.quantity - Number(l.discount ?? 0), 0);
  const shipping = Number(o.shipping ?? '0');
  const tax = Number(o.tax ?? '0');
  const money = (n: number) => n.toFixed(2);
  return {
    id: o.id,
    admin_graphql_api_id: `gid://shopify/Order/${o.id}`,
    email: o.customer?.email ?? 'guest@example.com',
    name: `#${o.id % 10000}`,
    created_at: '2026-11-20T10:00:00-05:00',
    updated_at: o.updated_at,
    processed_at: '2026-11-20T10:00:00-05:00',
    cancelled_at: o.cancelled_at ?? null,
    currency: 'USD',
    presentment_currency: 'USD',
    financial_status: o.financial_status ?? 'paid',
    fulfillment_status: null,
    subtotal_price: money(subtotal),
    total_price: money(subtotal + shipping + tax),
    total_price_set: { shop_money: { amount: money(subtotal + shipping + tax), currency_code: 'USD' }, presentment_money: { amount: money(subtotal + shipping + tax), currency_code: 'USD' } },
    total_tax: money(tax),
    total_shipping_price_set: { shop_money: { amount: money(shipping), currency_code: 'USD' }, presentment_money: { amount: money(shipping), currency_code: 'USD' } },
    customer: o.customer === null ? null : { id: o.customer?.id ?? 1, email: o.customer?.email ?? 'c@example.com', first_name: 'Ada', last_name: 'Lovelace' },
    line_items: o.lines.map((l) => ({
      id: l.id,
      product_id: l.product_id,
      variant_id: l.product_id ? l.product_id * 10 : null,
      title: `Product ${l.product_id}`,
      quantity: l.quantity,
      price: l.price,
      price_set: { shop_money: { amount: l.price, currency_code: 'USD' }, presentment_money: { amount: l.price, currency_code: 'USD' } },
      total_discount: '0.00',
      discount_allocations: l.discount ? [{ amount: l.discount, amount_set: { shop_money: { amount: l.discount, currency_code: 'USD' } }, discount_application_index: 0 }] : [],
    })),
    refunds: o.refunds ?? [],
  };
}

function shopifyRefund(r: { id: number; order_id: number; created_at: string; lines: Array<{ line_item_id: number; quantity: number }>; amount: string }) {
  return {
    id: r.id,
    order_id: r.order_id,
    created_at: r.created_at,
    note: 'customer return',
    restock: true,
    refund_line_items: r.lines.map((l, i) => ({ id: r.id * 10 + i, line_item_id: l.line_item_id, quantity: l.quantity, restock_type: 'return', subtotal: '0.00' })),
    transactions: [{ id: r.id * 100, order_id: r.order_id, kind: 'refund', gateway: 'bogus', status: 'success', amount: r.amount, currency: 'USD' }],
  };
}

let t: TestApp;
let shop: { shopId: string; apiKey: string; domain: string };
let domain: string;

async function connect(app: TestApp, s: { apiKey: string }, shopDomain: string) {
  const res = await app.graphql(s.apiKey, 'mutation($i: ShopifySettingsInput!) { shopifySettingsUpdate(input: $i) { shopify { shopDomain webhookSecretSet } userErrors { code message } } }', {
    i: { shopDomain, webhookSecret: SECRET },
  });
  expect(res.data.shopifySettingsUpdate).toEqual({ shopify: { shopDomain, webhookSecretSet: true }, userErrors: [] });
}

async function setUpShop(app: TestApp, name: string) {
  const s = await app.shop(name);
  await app.graphql(s.apiKey, 'mutation { earningRuleCreate(input: { type: place_order, name: "1 pt per $1", earnPoint: 1, spent: "1.00" }) { userErrors { message } } }');
  const d = `${name.toLowerCase().replace(/[^a-z0-9]+/g, '-')}-${randomUUID().slice(0, 8)}.myshopify.com`;
  await connect(app, s, d);
  return { ...s, domain: d };
}

/** Delivers a webhook as Shopify does: the raw body, its HMAC, the shop's domain, a webhook id. */
function deliver(app: TestApp, shopDomain: string, topic: string, body: unknown, options: ShopifyDeliveryOptions = {}) {
  return deliverShopifyWebhook(app.url, shopDomain, topic, body, { ...options, secret: options.secret ?? SECRET });
}

async function orderOf(app: TestApp, apiKey: string, orderId: number) {
  const res = await fetch(`${app.url}/rest-api/v1/orders/${orderId}`, { headers: { authorization: `Bearer ${apiKey}` } });
  return res.status === 200 ? ((await res.json()) as { order: Record<string, unknown> }).order : null;
}

async function balance(app: TestApp, shopId: string, shopifyCustomerId: string) {
  const row = await app.app.database.db.selectFrom('customers').select(['points', 'email']).where('shop_id', '=', shopId).where('shopify_customer_id', '=', shopifyCustomerId).executeTakeFirst();
  return row;
}

async function webhooks(app: TestApp, apiKey: string) {
  const res = await app.graphql(apiKey, '{ shop { shopifyWebhooks(first: 50) { edges { node { webhookId topic status error attempts shopifyOrderId } } } } }');
  return res.data.shop.shopifyWebhooks.edges.map((e: any) => e.node) as Array<{ webhookId: string; topic: string; status: string; error: string | null; attempts: number }>;
}

const applyDue = () => t.app.scheduler.runDue();

beforeAll(async () => {
  t = await startTestApp({ WORKER: 'off' });
  shop = await setUpShop(t, 'Connector shop');
  domain = shop.domain;
});
afterAll(() => t?.stop());

describe('receiving', () => {
  it('a signed order webhook is stored (200) and applied after: the customer is created from the order, the order earns', async () => {
    const order = shopifyOrder({ id: 5001, customer: { id: 9001, email: 'ada@example.com' }, lines: [{ id: 1, product_id: 11, quantity: 2, price: '20.00' }, { id: 2, product_id: 12, quantity: 1, price: '10.00', discount: '2.50' }], shipping: '5.00', tax: '3.00', updated_at: '2026-11-20T10:00:00-05:00' });
    const res = await deliver(t, domain, 'orders/paid', order);
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({ success: true, status: 'accepted' });
    expect(await orderOf(t, shop.apiKey, 5001)).toBeNull();
    expect(await applyDue()).toBeGreaterThanOrEqual(1);
    // $47.50 of lines after discounts (shipping and tax do not count): 47 points.
    expect(await orderOf(t, shop.apiKey, 5001)).toMatchObject({ status: 'paid', subtotal: '47.50', shipping: '5.00', tax: '3.00', total: '55.50', pointsEarned: 47 });
    expect(await balance(t, shop.shopId, '9001')).toEqual({ points: 47, email: 'ada@example.com' });
  });

  it('a bad or missing signature is 401 or 400 and stores nothing; an unknown domain is the same 401', async () => {
    const before = (await webhooks(t, shop.apiKey)).length;
    const order = shopifyOrder({ id: 5002, customer: { id: 9002, email: 'b@example.com' }, lines: [{ id: 1, product_id: 11, quantity: 1, price: '10.00' }], updated_at: '2026-11-20T10:00:00Z' });
    const forged = await deliver(t, domain, 'orders/paid', order, { secret: 'not-the-secret' });
    expect(forged.status).toBe(401);
    const refusal = await forged.json();
    expect(refusal).toMatchObject({ success: false, error: 'shopify_signature_invalid' });
    expect((await deliver(t, domain, 'orders/paid', order, { hmac: 'AAAA' })).status).toBe(401);
    const missing = await fetch(`${t.url}${SHOPIFY_WEBHOOKS_PATH}`, { method: 'POST', headers: { 'content-type': 'application/json', 'x-shopify-shop-domain': domain }, body: '{}' });
    expect(missing.status).toBe(400);
    // 404 would tell anyone which domains are connected.
    const unknown = await deliver(t, 'nobody.myshopify.com', 'orders/paid', order);
    expect(unknown.status).toBe(401);
    expect(await unknown.json()).toEqual(refusal);
    expect(await webhooks(t, shop.apiKey)).toHaveLength(before);
  });

  it('the same webhook id twice, also at once, is stored and applied once', async () => {
    const order = shopifyOrder({ id: 5003, customer: { id: 9003, email: 'dup@example.com' }, lines: [{ id: 1, product_id: 11, quantity: 1, price: '30.00' }], updated_at: '2026-11-20T10:00:00Z' });
    const results = await Promise.all(Array.from({ length: 20 }, () => deliver(t, domain, 'orders/create', order, { webhookId: 'dup-1' })));
    const statuses = await Promise.all(results.map(async (r) => ((await r.json()) as { status: string }).status));
    expect(statuses.filter((s) => s === 'accepted')).toHaveLength(1);
    expect(statuses.filter((s) => s === 'duplicate')).toHaveLength(19);
    await applyDue();
    expect((await deliver(t, domain, 'orders/create', order, { webhookId: 'dup-1' })).status).toBe(200);
    await applyDue();
    expect((await balance(t, shop.shopId, '9003'))?.points).toBe(30);
    expect((await webhooks(t, shop.apiKey)).filter((w) => w.webhookId === 'dup-1')).toEqual([expect.objectContaining({ status: 'applied', attempts: 1 })]);
  });

  it('a replay triggered days ago, a topic not handled and a guest order are recorded as rejections, with their reason', async () => {
    const order = shopifyOrder({ id: 5004, customer: { id: 9004, email: 'r@example.com' }, lines: [{ id: 1, product_id: 11, quantity: 1, price: '30.00' }], updated_at: '2026-11-20T10:00:00Z' });
    const replay = await deliver(t, domain, 'orders/paid', order, { webhookId: 'replay-1', triggeredAt: new Date(Date.now() - 5 * 24 * HOUR) });
    expect(replay.status).toBe(200);
    expect(await replay.json()).toMatchObject({ status: 'rejected' });
    await deliver(t, domain, 'carts/create', { id: 'c1', line_items: [] }, { webhookId: 'product-1' });
    const guest = shopifyOrder({ id: 5005, customer: null, lines: [{ id: 1, product_id: 11, quantity: 1, price: '30.00' }], updated_at: '2026-11-20T10:00:00Z' });
    await deliver(t, domain, 'orders/paid', guest, { webhookId: 'guest-1' });
    await deliver(t, domain, 'orders/paid', { id: 'not an order' }, { webhookId: 'junk-1' });
    await applyDue();
    const listed = await webhooks(t, shop.apiKey);
    const byId = (id: string) => listed.find((w) => w.webhookId === id)!;
    expect(byId('replay-1')).toMatchObject({ status: 'rejected', error: expect.stringContaining('replay') });
    expect(byId('product-1')).toMatchObject({ status: 'rejected', error: expect.stringContaining('not handled') });
    expect(byId('guest-1')).toMatchObject({ status: 'rejected', error: expect.stringContaining('shopify_order_without_customer') });
    expect(byId('junk-1')).toMatchObject({ status: 'rejected', error: expect.stringContaining('validation_error') });
    expect(await orderOf(t, shop.apiKey, 5004)).toBeNull();
    expect(await balance(t, shop.shopId, '9004')).toBeUndefined();
  });
});

describe('refunds and arrival order', () => {
  const paid = (updated_at: string, refunds: unknown[] = [], financial_status = 'paid') =>
    shopifyOrder({ id: 6001, customer: { id: 9101, email: 'refund@example.com' }, lines: [{ id: 61, product_id: 21, quantity: 4, price: '25.00' }], updated_at, refunds, financial_status });
  const refund = shopifyRefund({ id: 701, order_id: 6001, created_at: '2026-11-21T09:00:00Z', lines: [{ line_item_id: 61, quantity: 1 }], amount: '25.00' });

  it('refunds/create carries the refund alone: the order is rebuilt from its stored state, and the orders/updated that repeats it changes nothing', async () => {
    await deliver(t, domain, 'orders/paid', paid('2026-11-20T10:00:00Z'));
    await applyDue();
    expect((await balance(t, shop.shopId, '9101'))?.points).toBe(100);
    await deliver(t, domain, 'refunds/create', refund);
    await applyDue();
    expect(await orderOf(t, shop.apiKey, 6001)).toMatchObject({ refunded: '25.00', pointsEarned: 75, pointsClawedBack: 25 });
    expect((await balance(t, shop.shopId, '9101'))?.points).toBe(75);
    await deliver(t, domain, 'orders/updated', paid('2026-11-21T09:00:01Z', [refund], 'partially_refunded'));
    await applyDue();
    expect(await orderOf(t, shop.apiKey, 6001)).toMatchObject({ status: 'partially_refunded', pointsEarned: 75, pointsClawedBack: 25 });
    expect((await balance(t, shop.shopId, '9101'))?.points).toBe(75);
    // An older state arriving last changes nothing.
    await deliver(t, domain, 'orders/updated', paid('2026-11-20T10:00:00Z'));
    await applyDue();
    expect((await balance(t, shop.shopId, '9101'))?.points).toBe(75);
  });

  it('a refund that arrives before its order waits for it; the order then earns net of it', async () => {
    const early = shopifyRefund({ id: 702, order_id: 6002, created_at: '2026-11-21T09:00:00Z', lines: [{ line_item_id: 62, quantity: 2 }], amount: '20.00' });
    await deliver(t, domain, 'refunds/create', early, { webhookId: 'early-refund' });
    await applyDue();
    expect((await webhooks(t, shop.apiKey)).find((w) => w.webhookId === 'early-refund')).toMatchObject({ status: 'waiting_for_order', error: null, attempts: 1 });
    await deliver(t, domain, 'orders/paid', shopifyOrder({ id: 6002, customer: { id: 9102, email: 'early@example.com' }, lines: [{ id: 62, product_id: 22, quantity: 5, price: '10.00' }], updated_at: '2026-11-20T10:00:00Z' }));
    await applyDue();
    expect((await webhooks(t, shop.apiKey)).find((w) => w.webhookId === 'early-refund')).toMatchObject({ status: 'applied', error: null });
    // The order's body says paid; the refund's money says in part.
    expect(await orderOf(t, shop.apiKey, 6002)).toMatchObject({ status: 'partially_refunded', refunded: '20.00', pointsEarned: 30, pointsClawedBack: 0 });
    expect((await balance(t, shop.shopId, '9102'))?.points).toBe(30);
  });

  it('a cancellation takes every point back', async () => {
    const order = (updated_at: string, cancelled_at: string | null) =>
      shopifyOrder({ id: 6003, customer: { id: 9103, email: 'cancel@example.com' }, lines: [{ id: 63, product_id: 23, quantity: 1, price: '40.00' }], updated_at, cancelled_at, financial_status: cancelled_at ? 'voided' : 'paid' });
    await deliver(t, domain, 'orders/paid', order('2026-11-20T10:00:00Z', null));
    await applyDue();
    await deliver(t, domain, 'orders/cancelled', order('2026-11-20T12:00:00Z', '2026-11-20T12:00:00Z'));
    await applyDue();
    expect(await orderOf(t, shop.apiKey, 6003)).toMatchObject({ status: 'cancelled', pointsEarned: 0, pointsClawedBack: 40 });
    expect((await balance(t, shop.shopId, '9103'))?.points).toBe(0);
  });

  it('customers/create and customers/update map onto the customer upsert', async () => {
    await deliver(t, domain, 'customers/create', { id: 9201, email: 'new@example.com', first_name: 'Grace', accepts_marketing: false });
    await deliver(t, domain, 'customers/update', { id: 9201, email: 'grace@example.com', first_name: 'Grace' });
    await applyDue();
    expect(await balance(t, shop.shopId, '9201')).toEqual({ points: 0, email: 'grace@example.com' });
  });

  it('webhooks of one order racing in any order leave an exact ledger: the net earn of every refund once', async () => {
    const lines = [{ id: 81, product_id: 31, quantity: 10, price: '10.00' }];
    const refunds = Array.from({ length: 5 }, (_, i) => shopifyRefund({ id: 800 + i, order_id: 6010, created_at: `2026-11-21T0${i}:00:00Z`, lines: [{ line_item_id: 81, quantity: 1 }], amount: '10.00' }));
    const deliveries = [
      deliver(t, domain, 'orders/create', shopifyOrder({ id: 6010, customer: { id: 9301, email: 'race@example.com' }, lines, updated_at: '2026-11-20T10:00:00Z', financial_status: 'pending' })),
      deliver(t, domain, 'orders/paid', shopifyOrder({ id: 6010, customer: { id: 9301, email: 'race@example.com' }, lines, updated_at: '2026-11-20T10:05:00Z' })),
      ...refunds.map((r) => deliver(t, domain, 'refunds/create', r)),
      deliver(t, domain, 'orders/updated', shopifyOrder({ id: 6010, customer: { id: 9301, email: 'race@example.com' }, lines, updated_at: '2026-11-21T02:00:01Z', refunds: refunds.slice(0, 3), financial_status: 'partially_refunded' })),
    ];
    expect((await Promise.all(deliveries)).map((r) => r.status)).toEqual(deliveries.map(() => 200));
    await applyDue();
    expect(await orderOf(t, shop.apiKey, 6010)).toMatchObject({ refunded: '50.00', pointsEarned: 50 });
    expect((await balance(t, shop.shopId, '9301'))?.points).toBe(50);
    const activities = await t.app.database.db.selectFrom('activities').innerJoin('customers', 'customers.id', 'activities.customer_id').select(['activities.old_points', 'activities.new_points']).where('customers.shopify_customer_id', '=', '9301').where('customers.shop_id', '=', shop.shopId).orderBy('activities.seq').execute();
    activities.forEach((a, i) => expect(a.old_points).toBe(i === 0 ? 0 : activities[i - 1]!.new_points));
    expect(activities.at(-1)?.new_points).toBe(50);
  });
});

describe('retention', () => {
  it('processed webhooks are purged, waiting ones never; a refund after the purge still applies, on the order\'s kept facts', async () => {
    const s = await setUpShop(t, 'Retention shop');
    const lines = [{ id: 91, product_id: 61, quantity: 4, price: '10.00' }];
    await deliver(t, s.domain, 'orders/paid', shopifyOrder({ id: 6100, customer: { id: 9601, email: 'keep@example.com' }, lines, updated_at: '2026-11-20T10:00:00Z' }));
    await deliver(t, s.domain, 'customers/create', { id: 9602, email: 'other@example.com' });
    await applyDue();
    expect((await balance(t, s.shopId, '9601'))?.points).toBe(40);
    // Stored after the last pass: still waiting when the purge runs.
    await deliver(t, s.domain, 'customers/update', { id: 9602, email: 'other2@example.com' }, { webhookId: 'waiting-1' });
    const purged = await purgeProcessedShopifyWebhooks(t.app.database.db, new Date(Date.now() + 24 * HOUR), { batchSize: 1, pauseMs: 0 });
    expect(purged).toBeGreaterThanOrEqual(2);
    expect((await webhooks(t, s.apiKey)).map((w) => w.webhookId)).toEqual(['waiting-1']);
    expect(await purgeProcessedShopifyWebhooks(t.app.database.db, new Date(Date.now() + 24 * HOUR))).toBe(0);

    await deliver(t, s.domain, 'refunds/create', shopifyRefund({ id: 991, order_id: 6100, created_at: '2026-11-22T10:00:00Z', lines: [{ line_item_id: 91, quantity: 1 }], amount: '10.00' }));
    await applyDue();
    expect(await orderOf(t, s.apiKey, 6100)).toMatchObject({ refunded: '10.00', pointsEarned: 30, pointsClawedBack: 10 });
    expect((await balance(t, s.shopId, '9601'))?.points).toBe(30);
    expect(await balance(t, s.shopId, '9602')).toEqual({ points: 0, email: 'other2@example.com' });
  });
});

describe('settings', () => {
  it('the secret is never shown; a domain belongs to one shop; a malformed domain is a user error', async () => {
    const res = await t.graphql(shop.apiKey, '{ shop { shopify { shopDomain webhookSecretSet } } }');
    expect(res.data.shop.shopify).toEqual({ shopDomain: domain, webhookSecretSet: true });
    expect(JSON.stringify(res)).not.toContain(SECRET);
    const stored = await t.app.database.db.selectFrom('shops').select('shopify_webhook_secret').where('id', '=', shop.shopId).executeTakeFirstOrThrow();
    expect(stored.shopify_webhook_secret).not.toContain(SECRET);
    const other = await t.shop('Other');
    const taken = await t.graphql(other.apiKey, 'mutation { shopifySettingsUpdate(input: { shopDomain: "' + domain + '", webhookSecret: "another-secret" }) { userErrors { code } } }');
    expect(taken.data.shopifySettingsUpdate.userErrors).toEqual([{ code: 'shopify_domain_taken' }]);
    const bad = await t.graphql(other.apiKey, 'mutation { shopifySettingsUpdate(input: { shopDomain: "example.com" }) { userErrors { code } } }');
    expect(bad.data.shopifySettingsUpdate.userErrors).toEqual([{ code: 'validation_error' }]);
  });
});

describe('an outage between the inbox and the apply', () => {
  it('loses nothing: what one instance stored before it stopped, the next start applies', async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'loyalty-shopify-'));
    const pg = onPostgres ? await isolatedPostgresUrl() : undefined;
    const env: Record<string, string> = pg ? { DATABASE_URL: pg.url } : { DATA_DIR: dir };
    try {
      const first = await startTestApp({ ...env, WORKER: 'off' });
      const s = await setUpShop(first, 'Outage shop');
      for (let i = 0; i < 5; i++) {
        const order = shopifyOrder({ id: 7000 + i, customer: { id: 9400 + i, email: `outage${i}@example.com` }, lines: [{ id: 1, product_id: 41, quantity: 1, price: '12.00' }], updated_at: '2026-11-20T10:00:00Z' });
        expect((await deliver(first, s.domain, 'orders/paid', order)).status).toBe(200);
      }
      await first.stop();
      const second = await startTestApp(env);
      try {
        await until(async () => (await webhooks(second, s.apiKey)).every((w) => w.status === 'applied'), 10_000, 'the inbox applied after the restart');
        for (let i = 0; i < 5; i++) expect((await balance(second, s.shopId, String(9400 + i)))?.points).toBe(12);
      } finally {
        await second.stop();
      }
    } finally {
      await pg?.drop();
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe.runIf(onPostgres)('two instances on one PostgreSQL database', () => {
  it('apply each stored webhook once, whichever claims it', async () => {
    const pg = await isolatedPostgresUrl();
    // Instances of one deployment share SECRETS_KEY, so each can check the shop's sealed secret.
    const env = { DATABASE_URL: pg.url, WORKER: 'off', SECRETS_KEY: randomBytes(32).toString('hex') };
    const a = await startTestApp(env);
    const b = await startTestApp(env);
    try {
      const s = await setUpShop(a, 'Two instances');
      const sent = Array.from({ length: 60 }, (_, i) => {
        const order = shopifyOrder({ id: 8000 + i, customer: { id: 9500 + (i % 6), email: `two${i % 6}@example.com` }, lines: [{ id: 1, product_id: 51, quantity: 1, price: '5.00' }], updated_at: '2026-11-20T10:00:00Z' });
        return deliver(i % 2 ? a : b, s.domain, 'orders/paid', order);
      });
      expect((await Promise.all(sent)).map((r) => r.status)).toEqual(sent.map(() => 200));
      await Promise.all([a.app.scheduler.runDue(), b.app.scheduler.runDue(), a.app.scheduler.runDue(), b.app.scheduler.runDue()]);
      const listed = await webhooks(a, s.apiKey);
      expect(listed.filter((w) => w.status !== 'applied' || w.attempts !== 1)).toEqual([]);
      for (let c = 0; c < 6; c++) expect((await balance(a, s.shopId, String(9500 + c)))?.points).toBe(50);
    } finally {
      await a.stop();
      await b.stop();
      await pg.drop();
    }
  });
});

describe('docs/api.md "Running a program", step by step', () => {
  it('a Shopify order earns pending points, a return takes some back from pending, the rest becomes available on time and is spendable', async () => {
    let offset = 0;
    const app = await startTestApp({ WORKER: 'off' }, { clock: () => Date.now() + offset });
    try {
      const s = await setUpShop(app, 'Program shop');
      await app.graphql(s.apiKey, 'mutation { shopSettingsUpdate(input: { currency: "USD", timezone: "America/New_York", pendingDays: 14 }) { userErrors { code } } }');
      const created = await app.graphql(s.apiKey, 'mutation { pointsRedemptionCreate(input: { name: "$5 off", type: amount, discountPrefix: "LOYAL-", rewardValue: 100, discountValue: 5 }) { pointsRedemption { _id } userErrors { code } } }');
      const rewardId = created.data.pointsRedemptionCreate.pointsRedemption._id;
      const lines = [
        { id: 13001, product_id: 8800111, quantity: 2, price: '35.00', discount: '5.00' },
        { id: 13002, product_id: 8800222, quantity: 1, price: '18.00' },
      ];
      const ada = { id: 7301234567890, email: 'ada@example.com' };
      const order = (financial_status: string, updated_at: string) => shopifyOrder({ id: 5550001001, customer: ada, lines, shipping: '6.99', tax: '6.64', financial_status, updated_at });
      await deliver(app, s.domain, 'orders/create', order('pending', '2026-11-20T10:00:05-05:00'));
      await app.app.scheduler.runDue();
      await deliver(app, s.domain, 'orders/paid', order('paid', '2026-11-20T10:01:00-05:00'));
      await app.app.scheduler.runDue();
      const customer = async () =>
        (await app.graphql(s.apiKey, '{ customer(identifier: "7301234567890") { points pendingPoints } }')).data.customer as { points: number; pendingPoints: number };
      expect(await customer()).toEqual({ points: 0, pendingPoints: 83 });

      await deliver(app, s.domain, 'refunds/create', shopifyRefund({ id: 990001, order_id: 5550001001, created_at: '2026-11-22T14:30:00-05:00', lines: [{ line_item_id: 13002, quantity: 1 }], amount: '19.44' }));
      await app.app.scheduler.runDue();
      expect(await customer()).toEqual({ points: 0, pendingPoints: 63 });

      offset += 14 * 24 * HOUR + 60_000;
      await app.app.scheduler.runDue();
      expect(await customer()).toEqual({ points: 63, pendingPoints: 0 });
      const redeem = await app.post('/rest-api/v1/pointsRedemptions', { customerIdentifier: '7301234567890', pointsAmount: 100, rewardId }, s.apiKey);
      expect(redeem.status).toBe(422);
      expect(await redeem.json()).toMatchObject({ error: 'insufficient_points' });
    } finally {
      await app.stop();
    }
  });
});
