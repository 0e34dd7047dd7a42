import { createHmac, randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { onPostgres, startTestApp, type TestApp } from './helpers.js';
import { until } from './live-helpers.js';
import { checkLedger } from './reliability/processes.js';
import { type Receiver, startReceiver } from './webhook-receiver.js';

/**
 * Data rights (issue 37, items 2 and 3): a customer's data out as one document, through both faces;
 * their erasure, which leaves a tombstone whose ledger, orders and the shop's insights still add
 * up, finds them by no former identifier, and purges what carried them, exact under writes racing it.
 */

const DB_NAME = onPostgres ? 'PostgreSQL' : 'PGlite';
const EXPORT = 'query($id: String!) { customerDataExport(customerIdentifier: $id) }';
const ERASE = `mutation($input: CustomerEraseInput!) {
  customerErase(input: $input) { customer { _id email shopifyCustomerId birthday points } cancelledCodes revokedTokens purgedDeliveries purgedShopifyWebhooks userErrors { code field message } }
}`;
const SHOPIFY_SECRET = 'shpss_data_rights_secret';

let t: TestApp;
let receiver: Receiver;

beforeAll(async () => {
  receiver = await startReceiver();
  t = await startTestApp({ SECRETS_KEY: randomBytes(32).toString('hex'), RATE_LIMIT_PER_MINUTE: '100000', WEBHOOK_ALLOWED_HOSTS: 'localhost' });
});

afterAll(async () => {
  await t?.stop();
  await receiver?.close();
});

const rest = (method: 'GET' | 'POST', path: string, apiKey: string, body?: unknown) =>
  fetch(`${t.url}/rest-api/v1${path}`, {
    method,
    headers: { authorization: `Bearer ${apiKey}`, ...(body ? { 'content-type': 'application/json' } : {}) },
    body: body ? JSON.stringify(body) : undefined,
  });

/** A shop whose customer Ada has every kind of record: points, a code, an order, a token, a referee, e-mailed webhooks. */
async function adaShop(name: string) {
  const s = await t.shop(name);
  const domain = `${name.toLowerCase().replace(/\W+/g, '-')}-${randomBytes(3).toString('hex')}.myshopify.com`;
  expect((await t.graphql(s.apiKey, 'mutation($i: ShopifySettingsInput!) { shopifySettingsUpdate(input: $i) { userErrors { code } } }', { i: { shopDomain: domain, webhookSecret: SHOPIFY_SECRET } })).data.shopifySettingsUpdate.userErrors).toEqual([]);
  for (const topic of ['customers/*', 'points/*', 'referrals/*']) {
    expect((await rest('POST', '/webhooks/subscriptions', s.apiKey, { topic, callbackUrl: `${receiver.url}/${s.shopId}` })).status).toBe(201);
  }
  const upsert = (input: Record<string, unknown>) => t.graphql(s.apiKey, 'mutation($input: CustomerInput!) { customerUpsert(input: $input) { customer { _id } } }', { input });
  const ada = (await upsert({ shopifyCustomerId: '7001', email: 'Ada.Lovelace@example.com', birthday: '1815-12-10' })).data.customerUpsert.customer._id as string;
  expect((await rest('POST', '/points/add', s.apiKey, { customerIdentifier: '7001', amount: 1000 })).status).toBe(200);
  const reward = await t.graphql(s.apiKey, 'mutation($input: PointsRedemptionInput!) { pointsRedemptionCreate(input: $input) { pointsRedemption { _id } } }', {
    input: { name: '$5 off', type: 'amount', discountPrefix: 'ADA-', rewardValue: 100, discountValue: 5 },
  });
  const redeem = () => rest('POST', '/pointsRedemptions', s.apiKey, { customerIdentifier: '7001', rewardId: reward.data.pointsRedemptionCreate.pointsRedemption._id, pointsAmount: 100 });
  const used = ((await (await redeem()).json()) as { discountCode: string }).discountCode;
  const issued = ((await (await redeem()).json()) as { discountCode: string }).discountCode;
  const order = await fetch(`${t.url}/rest-api/v1/orders/A-1`, {
    method: 'PUT',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${s.apiKey}` },
    body: JSON.stringify({ customerIdentifier: '7001', currency: 'USD', subtotal: '40.00', total: '40.00', status: 'paid', lineItems: [{ productId: 'p', quantity: 1, price: '40.00' }], discountCodes: [{ code: used, amount: '5.00' }] }),
  });
  expect(order.status).toBeLessThan(300);
  const token = (await t.graphql(s.apiKey, 'mutation($input: CustomerAccessTokenCreateInput!) { customerAccessTokenCreate(input: $input) { accessToken } }', { input: { customerIdentifier: '7001' } })).data.customerAccessTokenCreate.accessToken as string;
  const referralCode = (await (await fetch(`${t.url}/rest-api/v1/referral?customerIdentifier=7001`, { headers: { authorization: `Bearer ${s.apiKey}` } })).json()).data.referralCode as string;
  const friend = await t.graphql(s.apiKey, 'mutation($input: ReferralRegisterInput!) { referralRegister(input: $input) { customer { _id } userErrors { code } } }', {
    input: { referralCode, customer: { shopifyCustomerId: '7002', email: 'grace@example.com' } },
  });
  expect(friend.data.referralRegister.userErrors).toEqual([]);
  // Shopify's word on Ada: her customer record and an order of hers, stored in the inbox.
  for (const [topic, body] of [
    ['customers/update', { id: 7001, email: 'ada.lovelace@example.com', first_name: 'Ada', updated_at: '2026-11-20T10:00:00Z' }],
    ['orders/paid', { id: 5550001, updated_at: '2026-11-20T10:00:00Z', financial_status: 'paid', currency: 'USD', total_price: '0.00', email: 'ada.lovelace@example.com', shipping_address: { name: 'Ada Lovelace', address1: '12 St James Sq' }, customer: { id: 7001, email: 'ada.lovelace@example.com' }, line_items: [] }],
  ] as const) {
    const text = JSON.stringify(body);
    const res = await fetch(`${t.url}/integrations/shopify/webhooks`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-shopify-topic': topic, 'x-shopify-hmac-sha256': createHmac('sha256', SHOPIFY_SECRET).update(text).digest('base64'), 'x-shopify-shop-domain': domain, 'x-shopify-webhook-id': randomBytes(8).toString('hex') },
      body: text,
    });
    expect(res.status).toBe(200);
  }
  const db = t.app.database.db;
  await until(async () => (await db.selectFrom('shopify_inbox').select('id').where('shop_id', '=', s.shopId).where('processed_at', 'is', null).execute()).length === 0, 20_000, 'the Shopify webhooks applied');
  await until(async () => (await db.selectFrom('webhook_deliveries').select('id').where('shop_id', '=', s.shopId).where('status', '!=', 'succeeded').execute()).length === 0 && (await db.selectFrom('webhook_deliveries').select('id').where('shop_id', '=', s.shopId).execute()).length > 0, 20_000, 'the deliveries sent');
  return { ...s, ada, friend: friend.data.referralRegister.customer._id as string, used, issued, token, referralCode };
}

describe(`customerDataExport and GET /customers/data (${DB_NAME})`, () => {
  it('gives everything held on the customer as one document, and nothing of anyone else', async () => {
    const s = await adaShop('Export shop');
    const doc = (await t.graphql(s.apiKey, EXPORT, { id: 'ada.lovelace@example.com' })).data.customerDataExport;
    // Shopify's customers/update wrote her e-mail as it has it.
    expect(doc.customer).toMatchObject({ _id: s.ada, shopifyCustomerId: '7001', email: 'ada.lovelace@example.com', birthday: '1815-12-10', erasedAt: null });
    const ledger = doc.ledger as Array<{ type: string; oldPoints: number; newPoints: number }>;
    expect(ledger.map((a) => a.type).sort()).toEqual(['add_points', 'redeem_points', 'redeem_points']);
    expect(ledger.reduce((sum, a) => sum + a.newPoints - a.oldPoints, 0)).toBe(doc.customer.points);
    expect(doc.orders.map((o: { orderId: string }) => o.orderId).sort()).toEqual(['5550001', 'A-1']);
    expect(Object.fromEntries(doc.discountCodes.map((c: { code: string; status: string }) => [c.code, c.status]))).toEqual({ [s.used]: 'used', [s.issued]: 'issued' });
    expect(doc.referralCode.code).toBe(s.referralCode);
    expect(doc.referrals).toEqual([expect.objectContaining({ role: 'referrer', otherCustomer: s.friend, referralCode: s.referralCode })]);
    expect(doc.accessTokens).toHaveLength(1);
    expect(Object.keys(doc.accessTokens[0]).sort()).toEqual(['createdAt', 'expiresAt', 'id', 'prefix', 'revokedAt']);
    // Where their data went: every delivery whose payload named them, and only those.
    const db = t.app.database.db;
    const naming = (await db.selectFrom('webhook_deliveries').select(['id', 'payload']).where('shop_id', '=', s.shopId).execute()).filter((d) => d.payload.includes(s.ada)).map((d) => d.id);
    expect(naming.length).toBeGreaterThan(3);
    expect(doc.webhookDeliveries.map((d: { id: string }) => d.id).sort()).toEqual(naming.sort());
    expect(doc.webhookDeliveries[0]).toEqual({ id: expect.any(String), topic: expect.any(String), status: 'succeeded', createdAt: expect.any(String), sentTo: `${receiver.url}/${s.shopId}` });
    // Not the friend's e-mail, not a token's secret.
    const text = JSON.stringify(doc);
    expect(text).not.toContain('grace@example.com');
    expect(text).not.toContain(s.token);

    // The REST twin gives the same document (but for when it was made); another shop has no such customer.
    const res = await fetch(`${t.url}/rest-api/v1/customers/data?customerIdentifier=7001`, { headers: { authorization: `Bearer ${s.apiKey}` } });
    expect(res.status).toBe(200);
    expect(res.headers.get('cache-control')).toBe('no-store');
    const body = (await res.json()) as { data: Record<string, unknown> };
    expect({ ...body.data, exportedAt: null }).toEqual({ ...doc, exportedAt: null });
    const other = await t.shop('Export other shop');
    expect((await t.graphql(other.apiKey, EXPORT, { id: '7001' })).data.customerDataExport).toBeNull();
    expect((await fetch(`${t.url}/rest-api/v1/customers/data?customerIdentifier=7001`, { headers: { authorization: `Bearer ${other.apiKey}` } })).status).toBe(404);
    expect((await fetch(`${t.url}/rest-api/v1/customers/data`, { headers: { authorization: `Bearer ${s.apiKey}` } })).status).toBe(400);
  });
});

describe(`customerErase and POST /customers/erase (${DB_NAME})`, () => {
  it('leaves a tombstone that still adds up, found by no former identifier, and purges what carried them', async () => {
    const s = await adaShop('Erase shop');
    const db = t.app.database.db;
    // What the erasure must not change (its cancelled code is counted as one, below).
    const insightsQuery = 'query($from: DateTime!, $to: DateTime!) { shop { insights(from: $from, to: $to) { points { at members newMembers expired clawedBack issued { total manual orders referrals rules } codes { issued used expired } } rewards { rewardId codes points used } } } }';
    const range = { from: new Date(Date.now() - 86_400_000).toISOString(), to: new Date(Date.now() + 86_400_000).toISOString() };
    const insightsBefore = (await t.graphql(s.apiKey, insightsQuery, range)).data.shop.insights;
    const pointsBefore = (await db.selectFrom('customers').select('points').where('id', '=', s.ada).executeTakeFirstOrThrow()).points;
    const deliveriesBefore = await db.selectFrom('webhook_deliveries').select(['id', 'payload']).where('shop_id', '=', s.shopId).execute();
    const carrying = deliveriesBefore.filter((d) => d.payload.toLowerCase().includes('ada.lovelace@example.com'));
    expect(carrying.length).toBeGreaterThan(0);
    const storefrontMe = () => fetch(`${t.url}/storefront/graphql`, { method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${s.token}` }, body: JSON.stringify({ query: '{ me { _id } }' }) });
    // Her token in use until the erasure: the server trusts it from its cache meanwhile.
    expect((await storefrontMe()).status).toBe(200);

    const erased = (await t.graphql(s.apiKey, ERASE, { input: { customerIdentifier: 'Ada.Lovelace@example.com' } })).data.customerErase;
    expect(erased.userErrors).toEqual([]);
    expect(erased.customer).toEqual({ _id: s.ada, email: `erased-${s.ada}@erased.invalid`, shopifyCustomerId: `erased-${s.ada}`, birthday: null, points: pointsBefore });
    expect(erased).toMatchObject({ cancelledCodes: 1, revokedTokens: 1, purgedDeliveries: carrying.length, purgedShopifyWebhooks: 2 });
    // Her token no longer opens the storefront, from the erasure's answer on.
    expect((await storefrontMe()).status).toBe(401);

    // Found by none of the former identifiers, on either face; a second erasure finds no one.
    for (const identifier of ['7001', 'ada.lovelace@example.com', 'Ada.Lovelace@example.com']) {
      expect((await t.graphql(s.apiKey, 'query($id: String!) { customer(identifier: $id) { _id } }', { id: identifier })).data.customer).toBeNull();
      expect((await fetch(`${t.url}/rest-api/v1/vip/tiers/customer?customerIdentifier=${encodeURIComponent(identifier)}`, { headers: { authorization: `Bearer ${s.apiKey}` } })).status).toBe(404);
    }
    expect((await rest('POST', '/customers/erase', s.apiKey, { customerIdentifier: '7001' })).status).toBe(404);
    expect((await t.graphql(s.apiKey, ERASE, { input: { customerIdentifier: '7001' } })).data.customerErase.userErrors).toEqual([expect.objectContaining({ code: 'customer_not_found' })]);

    // The code still issued is cancelled, the used one stays used.
    const codes = await db.selectFrom('discount_codes').select(['code', 'status', 'returned_activity_id']).where('customer_id', '=', s.ada).execute();
    expect(Object.fromEntries(codes.map((c) => [c.code, [c.status, c.returned_activity_id]]))).toEqual({ [s.used]: ['used', null], [s.issued]: ['cancelled', null] });

    // Nothing stored carries her any more: payloads, events, audit values, Shopify bodies, e-mail records.
    const stored = [
      ...(await db.selectFrom('webhook_deliveries').select('payload').where('shop_id', '=', s.shopId).execute()).map((r) => r.payload),
      ...(await db.selectFrom('outbox_events').select('data').where('shop_id', '=', s.shopId).execute()).map((r) => JSON.stringify(r.data)),
      ...(await db.selectFrom('audit_log').select(['before', 'after']).where('shop_id', '=', s.shopId).execute()).map((r) => JSON.stringify(r)),
      ...(await db.selectFrom('shopify_inbox').select('body').where('shop_id', '=', s.shopId).execute()).map((r) => r.body),
      ...(await db.selectFrom('shopify_orders').select('order_body').where('shop_id', '=', s.shopId).execute()).map((r) => JSON.stringify(r.order_body)),
      ...(await db.selectFrom('customers').select(['email', 'shopify_customer_id', 'birthday']).where('shop_id', '=', s.shopId).execute()).map((r) => JSON.stringify(r)),
    ].join('\n');
    for (const trace of ['ada.lovelace@example.com', '1815-12-10', '"shopifyCustomerId":"7001"', '12 St James Sq']) expect(stored.toLowerCase()).not.toContain(trace.toLowerCase());
    expect(await db.selectFrom('shopify_customers').select('shopify_customer_id').where('shop_id', '=', s.shopId).where('shopify_customer_id', '=', '7001').execute()).toEqual([]);
    // A purged delivery shows no payload and cannot be replayed; the friend's records are untouched.
    const purged = await rest('GET', `/webhooks/deliveries/${carrying[0]!.id}`, s.apiKey);
    expect(((await purged.json()) as { delivery: { payload: unknown } }).delivery.payload).toBeNull();
    const replay = await rest('POST', `/webhooks/deliveries/${carrying[0]!.id}/replay`, s.apiKey);
    expect(replay.status).toBe(422);
    expect(((await replay.json()) as { error: string }).error).toBe('delivery_payload_purged');
    expect((await t.graphql(s.apiKey, 'query($id: String!) { customer(identifier: $id) { email } }', { id: '7002' })).data.customer).toEqual({ email: 'grace@example.com' });

    // The money still adds up: the ledger, the balance, the shop's insights; and the erasure is an event.
    expect((await checkLedger(db, s.shopId)).problems).toEqual([]);
    expect((await t.graphql(s.apiKey, insightsQuery, range)).data.shop.insights).toEqual(insightsBefore);
    const erasedEvent = () => receiver.requests.map((r) => JSON.parse(r.body)).find((b) => b.type === 'customers/erased' && b.shopId === s.shopId);
    await until(async () => erasedEvent() !== undefined, 20_000, 'the customers/erased delivery');
    const event = erasedEvent();
    expect(event.data).toEqual({ customer: s.ada, erasedAt: expect.any(String) });
    // The export now shows the tombstone.
    expect((await t.graphql(s.apiKey, EXPORT, { id: `erased-${s.ada}` })).data.customerDataExport.customer).toMatchObject({ _id: s.ada, erasedAt: expect.any(String), birthday: null });
  });

  it('is exact under writes racing it: every write before it lands on the tombstone, none after finds her', async () => {
    const s = await t.shop('Erase race shop');
    await t.customer(s.shopId, '8001', 0);
    const adds = Array.from({ length: 50 }, (_, i) => rest('POST', '/points/add', s.apiKey, { customerIdentifier: '8001', amount: i + 1 }));
    const erase = rest('POST', '/customers/erase', s.apiKey, { customerIdentifier: '8001@example.com' });
    const [answers, erased] = await Promise.all([Promise.all(adds), erase]);
    expect(erased.status).toBe(200);
    const tombstone = ((await erased.json()) as { customer: { _id: string; points: number } }).customer;
    const statuses = answers.map((r) => r.status);
    expect(statuses.every((status) => status === 200 || status === 404)).toBe(true);
    const added = (await Promise.all(answers.map(async (r, i) => (r.status === 200 ? i + 1 : 0)))).reduce((a, b) => a + b, 0);
    const db = t.app.database.db;
    const row = await db.selectFrom('customers').select(['points', 'email']).where('id', '=', tombstone._id).executeTakeFirstOrThrow();
    // Every acknowledged add is in the balance, and the tombstone's answer was taken after them all.
    expect(row.points).toBe(added);
    expect(tombstone.points).toBe(added);
    expect(row.email).toBe(`erased-${tombstone._id}@erased.invalid`);
    expect((await checkLedger(db, s.shopId)).problems).toEqual([]);
    expect((await rest('POST', '/points/add', s.apiKey, { customerIdentifier: '8001', amount: 1 })).status).toBe(404);
  });

  it('refuses bad input with a 4xx', async () => {
    const s = await t.shop('Erase input shop');
    expect((await rest('POST', '/customers/erase', s.apiKey, { customerIdentifier: '' })).status).toBe(400);
    expect((await rest('POST', '/customers/erase', s.apiKey, { customerIdentifier: 'x', extra: 1 })).status).toBe(400);
    expect((await rest('POST', '/customers/erase', s.apiKey, 'not json')).status).toBe(400);
  });
});
