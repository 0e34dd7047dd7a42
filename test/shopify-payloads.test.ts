import { createHmac, randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { Migrator, sql } from 'kysely';
import { stringify } from 'lossless-json';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migrations } from '../migrations/index.js';
import { openDatabase } from '../src/db/database.js';
import { migrateToLatest } from '../src/db/migrate.js';
import { type EarnRule, type LineState, MULTIPLIER_ONE, orderPoints, type OrderState } from '../src/domain/orders/order-earn.js';
import { orderPut, parseShopifyJson, parseShopifyOrder } from '../src/domain/shopify/shopify-payloads.js';
import { createShop } from '../src/domain/shops/shops.js';
import { SHOPIFY_WEBHOOKS_PATH } from '../src/rest/shopify-webhooks.js';
import { startTestApp, type TestApp } from './helpers.js';

// Shopify's own payloads (issue 31): ids past 2^53, gift cards, test orders, the sign-up bonus of a
// shop that connects mid-life, states and refunds arriving in any order. Bodies are built as text
// (lossless-json's stringify writes bigints as JSON numbers), as Shopify sends them.

const SECRET = 'shpss_payloads_secret_0123456789';
const DAY = 86_400_000;
const fixture = (name: string) => readFileSync(path.join(import.meta.dirname, 'fixtures/shopify', `${name}.json`), 'utf8');

let t: TestApp;
const db = () => t.app.database.db;

type Shop = { shopId: string; apiKey: string; domain: string };

async function connectedShop(name: string, rules: Array<Record<string, unknown>> = [{ type: 'place_order', name: '1 pt per $1', earnPoint: 1, spent: '1.00' }]): Promise<Shop> {
  const s = await t.shop(name);
  for (const input of rules) {
    const res = await t.graphql(s.apiKey, 'mutation($i: EarningRuleCreateInput!) { earningRuleCreate(input: $i) { userErrors { message } } }', { i: input });
    expect(res.data.earningRuleCreate.userErrors).toEqual([]);
  }
  const domain = `${name.toLowerCase().replace(/[^a-z0-9]+/g, '-')}-${randomUUID().slice(0, 8)}.myshopify.com`;
  const res = await t.graphql(s.apiKey, 'mutation($i: ShopifySettingsInput!) { shopifySettingsUpdate(input: $i) { userErrors { code } } }', { i: { shopDomain: domain, webhookSecret: SECRET } });
  expect(res.data.shopifySettingsUpdate.userErrors).toEqual([]);
  return { ...s, domain };
}

/** A signed delivery of `body` exactly as given (text), or of an object written with lossless-json (bigints as numbers). */
async function deliver(shop: Shop, topic: string, body: string | object, webhookId: string = randomUUID()) {
  const raw = typeof body === 'string' ? body : stringify(body)!;
  const res = await fetch(`${t.url}${SHOPIFY_WEBHOOKS_PATH}`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      'x-shopify-topic': topic,
      'x-shopify-hmac-sha256': createHmac('sha256', SECRET).update(raw).digest('base64'),
      'x-shopify-shop-domain': shop.domain,
      'x-shopify-webhook-id': webhookId,
      'x-shopify-api-version': '2026-07',
    },
    body: raw,
  });
  expect(res.status).toBe(200);
  return (await res.json()) as { status: string; id: string };
}

const applyDue = () => t.app.scheduler.runDue();

async function webhook(shop: Shop, webhookId: string) {
  const res = await t.graphql(shop.apiKey, '{ shop { shopifyWebhooks(first: 100) { edges { node { webhookId topic status error shopifyOrderId } } } } }');
  return res.data.shop.shopifyWebhooks.edges.map((e: any) => e.node).find((w: { webhookId: string }) => w.webhookId === webhookId);
}

async function order(shop: Shop, orderId: string) {
  const res = await fetch(`${t.url}/rest-api/v1/orders/${orderId}`, { headers: { authorization: `Bearer ${shop.apiKey}` } });
  return res.status === 200 ? ((await res.json()) as { order: any }).order : null;
}

async function customer(shop: Shop, shopifyCustomerId: string) {
  return db().selectFrom('customers').select(['id', 'shopify_customer_id', 'email', 'points']).where('shop_id', '=', shop.shopId).where('shopify_customer_id', '=', shopifyCustomerId).executeTakeFirst();
}

/** A paid Shopify order in the Admin REST shape, ids as bigints (written as JSON numbers). */
function shopifyOrder(o: {
  id: bigint;
  customer: { id: bigint; email: string; created_at?: string | null; updated_at?: string | null };
  lines: Array<{ id: bigint; product_id: bigint | null; quantity: number; price: string; gift_card?: boolean }>;
  updated_at: string;
  financial_status?: string;
  test?: boolean;
}) {
  const cents = o.lines.reduce((sum, l) => sum + Math.round(Number(l.price) * 100) * l.quantity, 0);
  const total = (cents / 100).toFixed(2);
  return {
    id: o.id,
    admin_graphql_api_id: `gid://shopify/Order/${o.id}`,
    email: o.customer.email,
    currency: 'USD',
    financial_status: o.financial_status ?? 'paid',
    test: o.test ?? false,
    processed_at: '2026-11-20T10:00:00-05:00',
    updated_at: o.updated_at,
    cancelled_at: null,
    total_price: total,
    total_price_set: { shop_money: { amount: total, currency_code: 'USD' } },
    total_tax: '0.00',
    customer: { created_at: null, updated_at: null, ...o.customer },
    line_items: o.lines.map((l) => ({ ...l, gift_card: l.gift_card ?? false, variant_id: null, price_set: { shop_money: { amount: l.price, currency_code: 'USD' } }, discount_allocations: [] })),
    refunds: [],
  };
}

function shopifyRefund(r: { id: bigint; order_id: bigint; created_at: string; lines?: Array<{ line_item_id: bigint; quantity: number }>; amounts: string[] }) {
  return {
    id: r.id,
    order_id: r.order_id,
    created_at: r.created_at,
    refund_line_items: (r.lines ?? []).map((l, i) => ({ id: r.id + BigInt(i + 1), ...l })),
    transactions: r.amounts.map((amount, i) => ({ id: r.id * 10n + BigInt(i), order_id: r.order_id, kind: 'refund', status: 'success', amount })),
  };
}

beforeAll(async () => {
  t = await startTestApp({ WORKER: 'off' });
});
afterAll(() => t?.stop());

describe('reading Shopify bodies without losing a digit', () => {
  it.each([
    ['an id past 2^53 keeps its digits, as text', '{"id": 820982911946154508}', { id: '820982911946154508' }],
    ['2^53 + 1, which a double cannot hold', '{"id":9007199254740993}', { id: '9007199254740993' }],
    ['the largest safe integer stays a number', '{"id":9007199254740991}', { id: 9007199254740991 }],
    ['a real shop\'s 13-digit id is a number', '{"id":5678901234567,"n":[1,2.5]}', { id: 5678901234567, n: [1, 2.5] }],
    ['money as a number stays a number', '{"subtotal":89.99,"total_tax":0.0}', { subtotal: 89.99, total_tax: 0 }],
    ['a decimal with more digits than a double keeps its text', '{"rate":0.03144408811829065123}', { rate: '0.03144408811829065123' }],
    ['long digits inside a string are a string', '{"note":"call 123456789012345678","id":7}', { note: 'call 123456789012345678', id: 7 }],
  ])('%s', (_name, text, expected) => {
    expect(parseShopifyJson(text)).toEqual(expected);
  });

  it('a malformed body throws, as JSON.parse does', () => {
    expect(() => parseShopifyJson('{"id": 820982911946154508')).toThrow(SyntaxError);
    expect(() => parseShopifyJson('{"id": 1')).toThrow(SyntaxError);
  });

  it('the documented order maps to a PUT /orders state with every id as text', () => {
    const { orderId, body } = orderPut(parseShopifyOrder(parseShopifyJson(fixture('orders-create'))), []);
    expect(orderId).toBe('820982911946154508');
    expect(body).toMatchObject({
      customerIdentifier: '115310627314723954',
      status: 'cancelled',
      test: true,
      total: '404.95',
      lineItems: [
        { productId: '788032119674292922', quantity: 1, price: '89.99', giftCard: false },
        // A line without a product (Shopify's custom line) is named by its line id.
        { productId: 'line-789012345678901234', price: '19.99' },
        { productId: 'line-890123456789012345', price: '24.99' },
        { productId: '788032119674292922', price: '159.99' },
        { productId: '788032119674292922', price: '119.99' },
      ],
    });
  });
});

describe("Shopify's documented sample bodies, end to end", () => {
  it('every topic the connector handles is applied, and the order and customers read back with every digit', async () => {
    const shop = await connectedShop('Fixtures shop');
    // The refund first: Shopify does not order its webhooks. It waits for its order.
    const refund = await deliver(shop, 'refunds/create', fixture('refunds-create'), 'fx-refund');
    expect(refund.status).toBe('accepted');
    await deliver(shop, 'customers/create', fixture('customers-create'), 'fx-customer-create');
    await applyDue();
    expect(await webhook(shop, 'fx-refund')).toMatchObject({ status: 'waiting_for_order', error: null, shopifyOrderId: '820982911946154508' });
    expect(await webhook(shop, 'fx-customer-create')).toMatchObject({ status: 'applied', error: null });

    await deliver(shop, 'orders/create', fixture('orders-create'), 'fx-orders-create');
    await applyDue();
    for (const topic of ['orders/paid', 'orders/updated', 'orders/cancelled', 'customers/update']) {
      await deliver(shop, topic, fixture(topic.replace('/', '-')), `fx-${topic}`);
    }
    await applyDue();
    for (const id of ['fx-refund', 'fx-orders-create', 'fx-orders/paid', 'fx-orders/updated', 'fx-orders/cancelled', 'fx-customers/update']) {
      expect(await webhook(shop, id), id).toMatchObject({ status: 'applied', error: null });
    }
    expect(await webhook(shop, 'fx-orders/paid')).toMatchObject({ shopifyOrderId: '820982911946154508' });

    // Shopify's sample is a cancelled (voided) test order whose every line the sample refund returned: it earns nothing.
    const stored = await order(shop, '820982911946154508');
    expect(stored).toMatchObject({
      orderId: '820982911946154508',
      status: 'cancelled',
      test: true,
      total: '404.95',
      refunded: '85.00',
      pointsEarned: 0,
      lineItems: [
        { productId: '788032119674292922', refundedQuantity: 1, giftCard: false },
        { productId: 'line-789012345678901234', refundedQuantity: 1 },
        { productId: 'line-890123456789012345', refundedQuantity: 1 },
        { productId: '788032119674292922', refundedQuantity: 1 },
        { productId: '788032119674292922', refundedQuantity: 1 },
      ],
    });
    // The order's customer, created from the order; the customers/* sample's customer.
    expect(await customer(shop, '115310627314723954')).toMatchObject({ email: 'john@example.com', points: 0, id: stored.customer });
    expect(await customer(shop, '706405506930370084')).toMatchObject({ email: 'bob@biller.com', points: 0 });
    const byGraphql = await t.graphql(shop.apiKey, '{ customer(identifier: "706405506930370084") { shopifyCustomerId } order(orderId: "820982911946154508") { orderId customer } }');
    expect(byGraphql.data).toEqual({ customer: { shopifyCustomerId: '706405506930370084' }, order: { orderId: '820982911946154508', customer: stored.customer } });

    // What Shopify said of the order is kept with its digits: the body and the refund by its id.
    const facts = await db()
      .selectFrom('shopify_orders')
      .select(['shopify_order_id', (eb) => eb.cast<string>('order_body', 'text').as('body'), (eb) => eb.cast<string>('refunds', 'text').as('refunds')])
      .where('shop_id', '=', shop.shopId)
      .executeTakeFirstOrThrow();
    expect(facts.shopify_order_id).toBe('820982911946154508');
    expect(facts.body).toContain('"id": 820982911946154508');
    expect(facts.refunds).toContain('"890088186047892319": {');
    expect(facts.refunds).toContain('"line_item_id": 976318377106520349');
  });
});

describe('gift cards', () => {
  const rule = (overrides: Partial<EarnRule> = {}): EarnRule => ({
    id: 'r',
    name: '1 per 1.00',
    earnPoint: 1,
    spentMinor: 100,
    includeProductIds: [],
    excludeProductIds: [],
    includeCollectionIds: [],
    excludeCollectionIds: [],
    includeShipping: false,
    includeTax: false,
    includeGiftCards: false,
    ...overrides,
  });
  const line = (productId: string, priceMinor: number, extra: Partial<LineState> = {}): LineState => ({ productId, collectionIds: [], quantity: 1, priceMinor, discountMinor: 0, refundedQuantity: 0, ...extra });
  const state = (lineItems: LineState[]): OrderState => ({ status: 'paid', shippingMinor: 0, taxMinor: 0, totalMinor: lineItems.reduce((s, l) => s + l.priceMinor * l.quantity, 0), refundedMinor: 0, lineItems });
  const shirt = line('shirt', 4000);
  const card = line('gift-card-50', 5000, { giftCard: true });

  it.each([
    ['a gift-card line earns nothing by default', [shirt, card], rule(), 40],
    ['nor alone', [card], rule(), 0],
    ['a rule with includeGiftCards counts it', [shirt, card], rule({ includeGiftCards: true }), 90],
    ['naming its product is not enough: the flag wins over includeProductIds', [card], rule({ includeProductIds: ['gift-card-50'] }), 0],
    ['an exclusion still wins over includeGiftCards', [shirt, card], rule({ includeGiftCards: true, excludeProductIds: ['gift-card-50'] }), 40],
    ['a refunded gift card leaves the rule that counted it', [shirt, line('gift-card-50', 5000, { giftCard: true, refundedQuantity: 1 })], rule({ includeGiftCards: true }), 40],
    ['a snapshot taken before the option existed leaves gift cards out', [shirt, card], (({ includeGiftCards: _, ...old }) => old)(rule()), 40],
    ['a line stored before the flag existed is no gift card', [line('shirt', 4000, { giftCard: undefined })], rule(), 40],
  ])('%s', (_name, lines, r, points) => {
    expect(orderPoints({ rules: [r as EarnRule], multiplierBp: MULTIPLIER_ONE, takenAt: '2026-11-27T00:00:00Z' }, state(lines as LineState[]))).toBe(points);
  });

  it('PUT /orders and orderUpsert take giftCard per line and show it; includeGiftCards is a rule option on both faces', async () => {
    const shop = await connectedShop('Gift cards shop', []);
    const created = await t.graphql(shop.apiKey, 'mutation { earningRuleCreate(input: { type: place_order, name: "Cards too", earnPoint: 1, spent: "1.00", includeGiftCards: true, active: false }) { earningRule { _id includeGiftCards } userErrors { code } } }');
    expect(created.data.earningRuleCreate).toMatchObject({ earningRule: { includeGiftCards: true }, userErrors: [] });
    const plain = await t.graphql(shop.apiKey, 'mutation { earningRuleCreate(input: { type: place_order, name: "Goods", earnPoint: 1, spent: "1.00" }) { earningRule { includeGiftCards } } }');
    expect(plain.data.earningRuleCreate.earningRule).toEqual({ includeGiftCards: false });
    const onSignUp = await t.graphql(shop.apiKey, 'mutation { earningRuleCreate(input: { type: sign_up, name: "Welcome", earnPoint: 5, includeGiftCards: true }) { userErrors { code field } } }');
    expect(onSignUp.data.earningRuleCreate.userErrors).toEqual([{ code: 'validation_error', field: ['input', 'includeGiftCards'] }]);
    const listed = await fetch(`${t.url}/rest-api/v1/earningRules`, { headers: { authorization: `Bearer ${shop.apiKey}` } });
    expect(((await listed.json()) as { data: unknown[] }).data).toEqual([expect.objectContaining({ includeGiftCards: true }), expect.objectContaining({ includeGiftCards: false })]);

    await t.customer(shop.shopId, 'gc-1');
    const body = {
      customerIdentifier: 'gc-1',
      currency: 'USD',
      subtotal: '90.00',
      total: '90.00',
      status: 'paid',
      lineItems: [
        { productId: 'shirt', quantity: 2, price: '20.00' },
        { productId: 'card', quantity: 1, price: '50.00', giftCard: true },
      ],
    };
    const rest = await fetch(`${t.url}/rest-api/v1/orders/gc-1001`, { method: 'PUT', headers: { 'content-type': 'application/json', authorization: `Bearer ${shop.apiKey}` }, body: JSON.stringify(body) });
    expect(rest.status).toBe(201);
    expect(((await rest.json()) as { order: unknown }).order).toMatchObject({ pointsEarned: 40, lineItems: [{ giftCard: false }, { giftCard: true }] });

    const upsert = await t.graphql(shop.apiKey, 'mutation($input: OrderInput!) { orderUpsert(orderId: "gc-1002", input: $input) { order { pointsEarned lineItems { productId giftCard } } userErrors { code } } }', { input: body });
    expect(upsert.data.orderUpsert).toEqual({ order: { pointsEarned: 40, lineItems: [{ productId: 'shirt', giftCard: false }, { productId: 'card', giftCard: true }] }, userErrors: [] });
  });

  it("a Shopify line with gift_card: true earns only under a rule that includes gift cards", async () => {
    const shop = await connectedShop('Shopify gift cards');
    const sale = (id: bigint, customerId: bigint) =>
      shopifyOrder({ id, customer: { id: customerId, email: `c${customerId}@example.com` }, updated_at: '2026-11-26T10:00:00Z', lines: [{ id: id * 10n, product_id: 7001n, quantity: 1, price: '30.00' }, { id: id * 10n + 1n, product_id: 7002n, quantity: 2, price: '25.00', gift_card: true }] });
    await deliver(shop, 'orders/paid', sale(9100000000000000001n, 9200000000000000001n));
    await applyDue();
    expect(await order(shop, '9100000000000000001')).toMatchObject({ pointsEarned: 30, lineItems: [{ giftCard: false }, { giftCard: true }] });
    const [rule] = (await t.graphql(shop.apiKey, '{ earningRules { _id } }')).data.earningRules;
    await t.graphql(shop.apiKey, `mutation { earningRuleUpdate(input: { id: "${rule._id}", includeGiftCards: true }) { userErrors { code } } }`);
    await deliver(shop, 'orders/paid', sale(9100000000000000002n, 9200000000000000001n));
    await applyDue();
    expect(await order(shop, '9100000000000000002')).toMatchObject({ pointsEarned: 80 });
    // The first order keeps the rules it was paid under.
    expect(await order(shop, '9100000000000000001')).toMatchObject({ pointsEarned: 30 });
    expect((await customer(shop, '9200000000000000001'))?.points).toBe(110);
  });
});

describe('test orders', () => {
  const paidOrder = (customerIdentifier: string, test: boolean | undefined) => ({
    customerIdentifier,
    currency: 'USD',
    subtotal: '50.00',
    total: '50.00',
    status: 'paid',
    ...(test === undefined ? {} : { test }),
    lineItems: [{ productId: 'p', quantity: 1, price: '50.00' }],
  });
  const put = (shop: Shop, orderId: string, body: unknown) =>
    fetch(`${t.url}/rest-api/v1/orders/${orderId}`, { method: 'PUT', headers: { 'content-type': 'application/json', authorization: `Bearer ${shop.apiKey}` }, body: JSON.stringify(body) });
  const setEarnOnTestOrders = async (shop: Shop, on: boolean) => {
    const res = await t.graphql(shop.apiKey, `mutation { shopSettingsUpdate(input: { earnOnTestOrders: ${on} }) { settings { earnOnTestOrders } userErrors { code } } }`);
    expect(res.data.shopSettingsUpdate).toEqual({ settings: { earnOnTestOrders: on }, userErrors: [] });
  };

  it.each([
    [undefined, false, 50, null],
    [false, false, 50, null],
    [true, false, 0, expect.stringContaining('a test order')],
    [true, true, 50, null],
    [false, true, 50, null],
  ])('test: %s with earnOnTestOrders %s earns %i', async (test, earnOnTestOrders, points, earnNote) => {
    const shop = await connectedShop(`Test orders ${String(test)} ${earnOnTestOrders}`);
    if (earnOnTestOrders) await setEarnOnTestOrders(shop, true);
    await t.customer(shop.shopId, 'buyer');
    // A new order's first state (the one-statement path), and a pending → paid order (the locked path).
    const first = await put(shop, 'o-1', paidOrder('buyer', test));
    expect(first.status).toBe(201);
    expect(((await first.json()) as { order: unknown }).order).toMatchObject({ test: test ?? false, pointsEarned: points, earnNote });
    await put(shop, 'o-2', { ...paidOrder('buyer', test), status: 'pending' });
    expect(((await (await put(shop, 'o-2', paidOrder('buyer', test))).json()) as { order: unknown }).order).toMatchObject({ test: test ?? false, pointsEarned: points, earnNote });
    const graphql = await t.graphql(shop.apiKey, '{ order(orderId: "o-1") { test pointsEarned earnNote } }');
    expect(graphql.data.order).toEqual({ test: test ?? false, pointsEarned: points, earnNote });
    expect((await customer(shop, 'buyer'))?.points).toBe(2 * points);
  });

  it('turning earnOnTestOrders on applies to test orders first paid from then on, on every instance\'s next PUT', async () => {
    const shop = await connectedShop('Test orders switch');
    await t.customer(shop.shopId, 'buyer');
    expect(((await (await put(shop, 'before', paidOrder('buyer', true))).json()) as { order: unknown }).order).toMatchObject({ pointsEarned: 0 });
    await setEarnOnTestOrders(shop, true);
    expect(((await (await put(shop, 'after', paidOrder('buyer', true))).json()) as { order: unknown }).order).toMatchObject({ pointsEarned: 50, earnNote: null });
    // The order paid while it was off keeps its decision, as it keeps its rules.
    const later = await put(shop, 'before', { ...paidOrder('buyer', true), status: 'partially_refunded', refunded: '10.00' });
    expect(((await later.json()) as { order: unknown }).order).toMatchObject({ status: 'partially_refunded', pointsEarned: 0, earnNote: expect.stringContaining('a test order') });
    expect((await customer(shop, 'buyer'))?.points).toBe(50);
  });

  it("a Shopify order with test: true earns nothing unless the shop's setting says so", async () => {
    const shop = await connectedShop('Shopify test orders');
    const testOrder = (id: bigint) => shopifyOrder({ id, test: true, customer: { id: 4400000000000000001n, email: 'tester@example.com' }, updated_at: '2026-11-26T10:00:00Z', lines: [{ id: id + 1n, product_id: 1n, quantity: 1, price: '20.00' }] });
    await deliver(shop, 'orders/paid', testOrder(4500000000000000001n));
    await applyDue();
    expect(await order(shop, '4500000000000000001')).toMatchObject({ test: true, pointsEarned: 0, earnNote: expect.stringContaining('earnOnTestOrders') });
    await setEarnOnTestOrders(shop, true);
    await deliver(shop, 'orders/paid', testOrder(4500000000000000002n));
    await applyDue();
    expect(await order(shop, '4500000000000000002')).toMatchObject({ test: true, pointsEarned: 20, earnNote: null });
  });
});

describe('the sign-up bonus of a shop that connects mid-life', () => {
  const signUpRule = { type: 'sign_up', name: 'Welcome', earnPoint: 50 };
  const iso = (at: number) => new Date(at).toISOString();

  it('goes only to customers Shopify says signed up since the connection, however they are first seen', async () => {
    const shop = await connectedShop('Mid-life shop', [signUpRule, { type: 'place_order', name: '1 pt per $1', earnPoint: 1, spent: '1.00' }]);
    const { shopify_connected_at: connectedAt } = await db().selectFrom('shops').select('shopify_connected_at').where('id', '=', shop.shopId).executeTakeFirstOrThrow();
    const since = connectedAt!.getTime();
    expect((await t.graphql(shop.apiKey, '{ shop { settings { signUpBonusSince } } }')).data.shop.settings.signUpBonusSince).toBe(connectedAt!.toISOString());

    const existing = iso(since - 400 * DAY);
    const fresh = iso(since + 60_000);
    const cases: Array<[string, string, object, number]> = [
      ['an existing customer on customers/update', 'customers/update', { id: 1100000000000000001n, email: 'old1@example.com', created_at: existing, updated_at: fresh }, 0],
      ['an existing customer on customers/create (a re-sync)', 'customers/create', { id: 1100000000000000002n, email: 'old2@example.com', created_at: existing, updated_at: existing }, 0],
      ['a new customer on customers/create', 'customers/create', { id: 1100000000000000003n, email: 'new3@example.com', created_at: fresh, updated_at: fresh }, 50],
      ['a new customer on customers/update first', 'customers/update', { id: 1100000000000000004n, email: 'new4@example.com', created_at: fresh, updated_at: fresh }, 50],
      ['a customer Shopify gives no created_at for', 'customers/create', { id: 1100000000000000005n, email: 'nodate@example.com' }, 0],
    ];
    for (const [, topic, body] of cases) await deliver(shop, topic, body);
    // First seen on their orders: an existing customer, a new one, one without created_at.
    const onOrder = (n: bigint, created_at: string | null) =>
      shopifyOrder({ id: 1200000000000000000n + n, customer: { id: 1100000000000000000n + n, email: `order${n}@example.com`, created_at }, updated_at: '2026-11-26T10:00:00Z', lines: [{ id: n, product_id: 1n, quantity: 1, price: '10.00' }] });
    await deliver(shop, 'orders/paid', onOrder(6n, existing));
    await deliver(shop, 'orders/paid', onOrder(7n, fresh));
    await deliver(shop, 'orders/paid', onOrder(8n, null));
    await applyDue();
    for (const [name, , body, bonus] of cases) expect((await customer(shop, String((body as { id: bigint }).id)))?.points, name).toBe(bonus);
    expect((await customer(shop, '1100000000000000006'))?.points).toBe(10);
    expect((await customer(shop, '1100000000000000007'))?.points).toBe(60);
    expect((await customer(shop, '1100000000000000008'))?.points).toBe(10);
    // A sign-up through the API is a sign-up now.
    const upsert = await t.graphql(shop.apiKey, 'mutation { customerUpsert(input: { shopifyCustomerId: "api-1", email: "api1@example.com" }) { customer { points } } }');
    expect(upsert.data.customerUpsert.customer).toEqual({ points: 50 });
  });

  it('signUpBonusSince moves the start; null brings back the connection time; reconnecting keeps it', async () => {
    const shop = await connectedShop('Since shop', [signUpRule]);
    const settings = async () => (await t.graphql(shop.apiKey, '{ shop { settings { signUpBonusSince } } }')).data.shop.settings.signUpBonusSince as string;
    const connectedAt = await settings();
    const since = iso(Date.parse(connectedAt) - 30 * DAY);
    const set = await t.graphql(shop.apiKey, `mutation { shopSettingsUpdate(input: { signUpBonusSince: "${since}" }) { settings { signUpBonusSince } userErrors { code } } }`);
    expect(set.data.shopSettingsUpdate).toEqual({ settings: { signUpBonusSince: since }, userErrors: [] });
    await deliver(shop, 'customers/create', { id: 1300000000000000001n, email: 'month@example.com', created_at: iso(Date.parse(connectedAt) - 10 * DAY) });
    await deliver(shop, 'customers/create', { id: 1300000000000000002n, email: 'year@example.com', created_at: iso(Date.parse(connectedAt) - 300 * DAY) });
    await applyDue();
    expect((await customer(shop, '1300000000000000001'))?.points).toBe(50);
    expect((await customer(shop, '1300000000000000002'))?.points).toBe(0);

    const reset = await t.graphql(shop.apiKey, 'mutation { shopSettingsUpdate(input: { signUpBonusSince: null }) { settings { signUpBonusSince } } }');
    expect(reset.data.shopSettingsUpdate.settings.signUpBonusSince).toBe(connectedAt);
    const again = await t.graphql(shop.apiKey, `mutation { shopifySettingsUpdate(input: { shopDomain: "${shop.domain}" }) { userErrors { code } } }`);
    expect(again.data.shopifySettingsUpdate.userErrors).toEqual([]);
    expect(await settings()).toBe(connectedAt);
    const bad = await t.graphql(shop.apiKey, 'mutation { shopSettingsUpdate(input: { signUpBonusSince: "yesterday" }) { userErrors { code } } }');
    expect(bad.errors).toEqual([expect.objectContaining({ message: expect.stringContaining('DateTime') })]);
    expect(await settings()).toBe(connectedAt);
  });

  it('many webhooks of one new customer at once award the bonus once; the ledger adds up', async () => {
    const shop = await connectedShop('Bonus race', [signUpRule, { type: 'place_order', name: '1 pt per $1', earnPoint: 1, spent: '1.00' }]);
    const fresh = iso(Date.now() + 60_000);
    const who = { id: 1400000000000000001n, email: 'race@example.com', created_at: fresh, updated_at: fresh };
    const sends = [
      deliver(shop, 'customers/create', who),
      deliver(shop, 'customers/update', who),
      ...Array.from({ length: 8 }, (_, i) =>
        deliver(shop, 'orders/paid', shopifyOrder({ id: 1500000000000000000n + BigInt(i), customer: who, updated_at: '2026-11-26T10:00:00Z', lines: [{ id: BigInt(i + 1), product_id: 1n, quantity: 1, price: '5.00' }] })),
      ),
    ];
    await Promise.all(sends);
    await Promise.all([applyDue(), applyDue(), applyDue()]);
    await applyDue();
    const c = (await customer(shop, '1400000000000000001'))!;
    expect(c.points).toBe(50 + 8 * 5);
    const entries = await db().selectFrom('activities').select(['old_points', 'new_points']).where('customer_id', '=', c.id).orderBy('seq').execute();
    entries.forEach((e, i) => expect(e.old_points).toBe(i === 0 ? 0 : entries[i - 1]!.new_points));
    expect(entries.at(-1)?.new_points).toBe(c.points);
    expect(await db().selectFrom('rule_awards').select('id').where('customer_id', '=', c.id).execute()).toHaveLength(1);
  });
});

describe('order of arrival', () => {
  it('a customers/update older than the state applied changes nothing, also after the customer came with an order', async () => {
    const shop = await connectedShop('Arrival shop');
    const state = (email: string, updated_at: string) => ({ id: 1600000000000000001n, email, created_at: '2020-01-01T00:00:00Z', updated_at });
    await deliver(shop, 'customers/update', state('second@example.com', '2026-11-26T10:00:00Z'));
    await applyDue();
    await deliver(shop, 'customers/update', state('first@example.com', '2026-11-26T09:00:00Z'));
    await applyDue();
    expect((await customer(shop, '1600000000000000001'))?.email).toBe('second@example.com');
    await deliver(shop, 'customers/update', state('third@example.com', '2026-11-26T11:00:00Z'));
    await applyDue();
    expect((await customer(shop, '1600000000000000001'))?.email).toBe('third@example.com');

    // Created from an order's customer (updated 12:00): a customers/update of 11:30 arriving after it is older.
    const buyer = { id: 1600000000000000002n, email: 'buyer-new@example.com', created_at: '2020-01-01T00:00:00Z', updated_at: '2026-11-26T12:00:00Z' };
    await deliver(shop, 'orders/paid', shopifyOrder({ id: 1700000000000000001n, customer: buyer, updated_at: '2026-11-26T12:00:00Z', lines: [{ id: 1n, product_id: 1n, quantity: 1, price: '10.00' }] }));
    await applyDue();
    await deliver(shop, 'customers/update', { ...buyer, email: 'buyer-old@example.com', updated_at: '2026-11-26T11:30:00Z' });
    await applyDue();
    expect((await customer(shop, '1600000000000000002'))?.email).toBe('buyer-new@example.com');
  });

  it('states of one customer racing in any order end at the newest', async () => {
    const shop = await connectedShop('Customer race');
    const hours = [3, 7, 1, 9, 4, 8, 2, 6, 5, 0];
    await Promise.all(hours.map((h) => deliver(shop, 'customers/update', { id: 1800000000000000001n, email: `h${h}@example.com`, updated_at: `2026-11-26T1${h}:00:00Z` })));
    await Promise.all([applyDue(), applyDue(), applyDue()]);
    await applyDue();
    expect((await customer(shop, '1800000000000000001'))?.email).toBe('h9@example.com');
  });

  it.each([
    ['a refund of part of the money', ['25.00'], 'partially_refunded', 75],
    ['refunds of all of it, in two', ['60.00', '40.00'], 'refunded', 0],
    ['a refund of units alone (no money back)', [], 'paid', 75],
  ])("after refunds/create alone (the order's body still says paid): %s", async (_name, amounts, status, points) => {
    const shop = await connectedShop(`Refund status ${status} ${amounts.length}`);
    const id = 1900000000000000001n;
    await deliver(shop, 'orders/paid', shopifyOrder({ id, customer: { id: 1900000000000000002n, email: 'refunds@example.com' }, updated_at: '2026-11-26T10:00:00Z', lines: [{ id: 1n, product_id: 1n, quantity: 4, price: '25.00' }] }));
    await applyDue();
    for (const [i, amount] of (amounts.length ? amounts : [null]).entries()) {
      const units = amounts.length ? [] : [{ line_item_id: 1n, quantity: 1 }];
      await deliver(shop, 'refunds/create', shopifyRefund({ id: 1910000000000000000n + BigInt(i * 100), order_id: id, created_at: `2026-11-26T1${i + 1}:00:00Z`, lines: units, amounts: amount ? [amount] : [] }));
    }
    await applyDue();
    expect(await order(shop, '1900000000000000001')).toMatchObject({ status, pointsEarned: points });
  });
});

describe('the database driver', () => {
  it('would round a stored id (it parses jsonb with JSON.parse): the connector reads the stored bodies as text', async () => {
    const shop = await connectedShop('Digits in jsonb');
    await deliver(shop, 'orders/create', fixture('orders-create'));
    await applyDue();
    const row = await db()
      .selectFrom('shopify_orders')
      .select((eb) => [eb.ref('order_body', '->').key('id' as never).as('parsed'), sql<string>`order_body->>'id'`.as('text')])
      .where('shop_id', '=', shop.shopId)
      .executeTakeFirstOrThrow();
    expect(String(row.parsed)).toBe('820982911946154500');
    expect(row.text).toBe('820982911946154508');
    expect((await order(shop, '820982911946154508'))?.orderId).toBe('820982911946154508');
  });
});

describe('the migration', () => {
  it("dates the Shopify connection of shops connected before it by their earliest webhook kept, else by the migration", async () => {
    const handle = await openDatabase({ dataDir: 'memory://' });
    try {
      const { db: old } = handle;
      const before = Object.fromEntries(Object.entries(migrations).filter(([name]) => name < '2026_11_27_016'));
      expect((await new Migrator({ db: old, provider: { getMigrations: async () => before } }).migrateToLatest()).error).toBeUndefined();
      const shopId = async (name: string) => (await createShop(old, name)).shop.id;
      const [withWebhooks, quiet, unconnected] = [await shopId('With webhooks'), await shopId('Quiet'), await shopId('Not connected')];
      await sql`update shops set shopify_domain = id || '.myshopify.com' where id in (${withWebhooks}, ${quiet})`.execute(old);
      const first = new Date('2026-11-20T08:00:00Z');
      for (const [i, at] of [first, new Date('2026-11-21T08:00:00Z')].entries()) {
        await sql`insert into shopify_inbox (id, shop_id, webhook_id, topic, body, received_at) values (${`w${i}`}, ${withWebhooks}, ${`w${i}`}, 'orders/paid', '{}', ${at})`.execute(old);
      }
      const started = Date.now();
      await migrateToLatest(old);
      const rows = await old.selectFrom('shops').select(['id', 'shopify_connected_at']).execute();
      const at = (id: string) => rows.find((r) => r.id === id)!.shopify_connected_at;
      expect(at(withWebhooks)).toEqual(first);
      expect(at(quiet)!.getTime()).toBeGreaterThanOrEqual(started - 1_000);
      expect(at(unconnected)).toBeNull();
    } finally {
      await handle.close();
    }
  });
});
