import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { REQUIRED_SCOPES } from '../src/domain/shopify/index.js';
import { SHOPIFY_TOPICS } from '../src/domain/shopify/index.js';
import { startTestApp, type TestApp } from './helpers.js';
import { until } from './live-helpers.js';
import { checkLedger } from './reliability/processes.js';
import { createShopifyAdminStandIn, type ShopifyAdminStandIn } from './support/shopify-admin.js';

/**
 * The Admin side of the Shopify connector (issue 34, items 1-3) against the stand-in of Shopify's
 * Admin API, which validates every document against Shopify's published schema: connecting with a
 * token or a client id and secret, scopes checked, webhooks registered, codes created in Shopify
 * on their reward's terms and deactivated when they end here, Shopify's refusals and outages.
 */

const REDIS_URL = process.env.TEST_REDIS_URL;
const redisEnv = (): Record<string, string> => (REDIS_URL ? { REDIS_URL, REDIS_KEY_PREFIX: `test:${randomBytes(4).toString('hex')}:` } : {});
const PUBLIC_URL = 'https://loyalty.example.com';

const CONNECT = `mutation($input: ShopifyAdminConnectInput!) {
  shopifyAdminConnect(input: $input) { shopifyAdmin { auth scopes missingScopes webhooks { topic state } } userErrors { code field message } }
}`;
const VIEW = `{ shop { shopifyAdmin { auth clientId scopes missingScopes tokenExpiresAt webhooks { topic state error } codesPending codesSynced codesFailed } } }`;
const CODE_FIELDS = 'code status shopifySync shopifyId shopifyError pointsReturned cancelledAt';

let shopify: ShopifyAdminStandIn;
let t: TestApp;
/** The app's clock: real time, moved on by hand (backoffs, token lifetimes). */
let offset = 0;
const clock = () => Date.now() + offset;

type Shop = { shopId: string; apiKey: string; rewardId: string; domain: string };

async function shopifyShop(name: string, reward: Record<string, unknown> = {}): Promise<Shop> {
  const s = await t.shop(name);
  const domain = `${name.toLowerCase().replace(/\W+/g, '-')}-${randomBytes(3).toString('hex')}.myshopify.com`;
  const settings = await t.graphql(s.apiKey, 'mutation($i: ShopifySettingsInput!) { shopifySettingsUpdate(input: $i) { userErrors { code } } }', { i: { shopDomain: domain, webhookSecret: 'shpss_test_secret_123' } });
  expect(settings.data.shopifySettingsUpdate.userErrors).toEqual([]);
  const created = await t.graphql(s.apiKey, 'mutation($input: PointsRedemptionInput!) { pointsRedemptionCreate(input: $input) { pointsRedemption { _id } userErrors { code message } } }', {
    input: { name: '$5 off', type: 'amount', discountPrefix: 'FIVE-', rewardValue: 300, discountValue: 5, expireDateType: 'days', expireDays: 30, ...reward },
  });
  expect(created.data.pointsRedemptionCreate.userErrors).toEqual([]);
  shopify.store(domain);
  return { ...s, domain, rewardId: created.data.pointsRedemptionCreate.pointsRedemption._id };
}

async function connect(s: Shop, input: Record<string, string>) {
  const res = await t.graphql(s.apiKey, CONNECT, { input });
  expect(res.errors).toBeUndefined();
  return res.data.shopifyAdminConnect;
}

async function view(s: Shop) {
  const res = await t.graphql(s.apiKey, VIEW);
  expect(res.errors).toBeUndefined();
  return res.data.shop.shopifyAdmin;
}

async function redeem(s: Shop, customerIdentifier: string): Promise<string> {
  const res = await t.post('/rest-api/v1/pointsRedemptions', { customerIdentifier, rewardId: s.rewardId, pointsAmount: 300 }, s.apiKey);
  expect(res.status).toBe(200);
  return ((await res.json()) as { discountCode: string }).discountCode;
}

async function code(s: Shop, customerIdentifier: string, text: string) {
  const res = await t.graphql(s.apiKey, `query($id: String!) { customer(identifier: $id) { discountCodes(first: 50) { edges { node { ${CODE_FIELDS} } } } } }`, { id: customerIdentifier });
  expect(res.errors).toBeUndefined();
  return res.data.customer.discountCodes.edges.map((e: any) => e.node).find((n: any) => n.code === text);
}

const points = async (s: Shop, id: string) =>
  (await t.app.database.db.selectFrom('customers').select('points').where('shop_id', '=', s.shopId).where('shopify_customer_id', '=', id).executeTakeFirstOrThrow()).points;

beforeAll(async () => {
  shopify = await createShopifyAdminStandIn();
  t = await startTestApp({ ...redisEnv(), RATE_LIMIT_PER_MINUTE: '1000000', PUBLIC_URL, SHOPIFY_ADMIN_BASE_URL: `${shopify.url}/stores/{shop}` }, { clock });
}, 60_000);
afterAll(async () => {
  await t?.stop();
  await shopify?.close();
});

describe('connecting a store', () => {
  it('with an access token: checks the scopes, registers every webhook topic once, even when connected twice', async () => {
    const s = await shopifyShop('Token shop');
    const token = shopify.store(s.domain).addAccessToken([...REQUIRED_SCOPES]);
    const connected = await connect(s, { accessToken: token });
    expect(connected.userErrors).toEqual([]);
    expect(connected.shopifyAdmin).toMatchObject({ auth: 'access_token', missingScopes: [] });
    expect(connected.shopifyAdmin.scopes).toEqual(expect.arrayContaining([...REQUIRED_SCOPES]));

    await until(async () => (await view(s)).webhooks.length === SHOPIFY_TOPICS.length && (await view(s)).webhooks.every((w: any) => w.state === 'registered'), 10_000, 'webhooks registered');
    const registered = [...shopify.store(s.domain).webhooks.values()];
    expect(registered.map((w) => w.topic).sort()).toEqual(SHOPIFY_TOPICS.map((topic) => topic.toUpperCase().replace('/', '_')).sort());
    expect(new Set(registered.map((w) => w.uri))).toEqual(new Set([`${PUBLIC_URL}/integrations/shopify/webhooks`]));

    // Connecting again registers nothing twice.
    expect((await connect(s, { accessToken: token })).userErrors).toEqual([]);
    await until(async () => shopify.store(s.domain).callsTo('webhookSubscriptions').length >= 2, 10_000, 'second registration pass');
    await until(async () => (await t.app.database.db.selectFrom('shopify_sync_jobs').select('id').where('shop_id', '=', s.shopId).where('kind', '=', 'webhooks_register').execute()).length === 0, 10_000, 'registration done');
    expect(shopify.store(s.domain).webhooks.size).toBe(SHOPIFY_TOPICS.length);
    // Secrets are never shown, nor stored in the clear.
    const stored = await t.app.database.db.selectFrom('shopify_admin_connections').selectAll().where('shop_id', '=', s.shopId).executeTakeFirstOrThrow();
    expect(JSON.stringify(stored)).not.toContain(token);
  });

  it('refuses credentials Shopify refuses, and says which scopes are missing', async () => {
    const s = await shopifyShop('Scopes shop');
    const bad = await connect(s, { accessToken: 'shpat_not_a_real_token' });
    expect(bad.userErrors).toEqual([expect.objectContaining({ code: 'shopify_credentials_refused', field: ['input', 'accessToken'] })]);
    const partial = shopify.store(s.domain).addAccessToken(['write_discounts', 'read_orders']);
    const missing = await connect(s, { accessToken: partial });
    expect(missing.userErrors).toEqual([expect.objectContaining({ code: 'shopify_scopes_missing' })]);
    expect(missing.userErrors[0].message).toContain('read_customers, read_products');
    expect(await view(s)).toBeNull();
    // Neither or both: a clear input error, not a call to Shopify.
    expect((await connect(s, { clientId: 'only-the-id-here' })).userErrors).toEqual([expect.objectContaining({ code: 'validation_error' })]);
  });

  it('with a client id and secret: a token from the client-credentials grant, renewed before it lapses', async () => {
    const s = await shopifyShop('Client shop');
    const app = shopify.store(s.domain).addClientApp({ scopes: [...REQUIRED_SCOPES] });
    const connected = await connect(s, { clientId: app.clientId, clientSecret: app.clientSecret });
    expect(connected.userErrors).toEqual([]);
    const before = await view(s);
    expect(before).toMatchObject({ auth: 'client_credentials', clientId: app.clientId });
    expect(Date.parse(before.tokenExpiresAt) - clock()).toBeGreaterThan(23 * 3600_000);
    const grants = () => shopify.store(s.domain).calls.filter((c) => c.kind === 'oauth').length;
    expect(grants()).toBe(1);

    // 23.5 hours on (both clocks): the next job renews the token first, and Shopify takes it.
    offset += 23.5 * 3600_000;
    shopify.setClock(clock());
    try {
      await t.customer(s.shopId, '7000000000000000101', 1000);
      const text = await redeem(s, '7000000000000000101');
      await until(async () => (await code(s, '7000000000000000101', text)).shopifySync === 'synced', 10_000, 'code synced with a renewed token');
      expect(grants()).toBe(2);
      expect(Date.parse((await view(s)).tokenExpiresAt)).toBeGreaterThan(Date.parse(before.tokenExpiresAt));
    } finally {
      shopify.useRealClock();
    }
    const wrong = await connect(s, { clientId: app.clientId, clientSecret: 'not-the-secret-at-all' });
    expect(wrong.userErrors).toEqual([expect.objectContaining({ code: 'shopify_credentials_refused', field: ['input', 'clientSecret'] })]);
  });

  it('disconnecting removes the webhooks it registered and forgets the credentials', async () => {
    const s = await shopifyShop('Leaving shop');
    const token = shopify.store(s.domain).addAccessToken([...REQUIRED_SCOPES]);
    await connect(s, { accessToken: token });
    await until(async () => shopify.store(s.domain).webhooks.size === SHOPIFY_TOPICS.length && (await view(s)).webhooks.every((w: any) => w.state === 'registered'), 10_000, 'registered');
    const res = await t.graphql(s.apiKey, 'mutation { shopifyAdminDisconnect { disconnected userErrors { code } } }');
    expect(res.data.shopifyAdminDisconnect).toEqual({ disconnected: true, userErrors: [] });
    expect(shopify.store(s.domain).webhooks.size).toBe(0);
    expect(await view(s)).toBeNull();
    const again = await t.graphql(s.apiKey, 'mutation { shopifyAdminDisconnect { disconnected userErrors { code } } }');
    expect(again.data.shopifyAdminDisconnect.userErrors).toEqual([{ code: 'shopify_admin_not_connected' }]);
  });
});

describe('codes in Shopify', () => {
  let s: Shop;
  beforeAll(async () => {
    s = await shopifyShop('Codes shop', { type: 'percentage', discountValue: 15, minimumRequirementType: 'purchase_amount', minimumRequirementValue: 40, combinations: ['shipping_discounts'] });
    expect((await connect(s, { accessToken: shopify.store(s.domain).addAccessToken([...REQUIRED_SCOPES]) })).userErrors).toEqual([]);
  });

  it('an issued code is created in Shopify on its reward\'s terms, for its customer, once; then synced with Shopify\'s id', async () => {
    await t.customer(s.shopId, '7000000000000000001', 1000);
    const text = await redeem(s, '7000000000000000001');
    expect(['pending', 'synced']).toContain((await code(s, '7000000000000000001', text)).shopifySync);
    await until(async () => (await code(s, '7000000000000000001', text)).shopifySync === 'synced', 10_000, 'synced');
    const made = shopify.store(s.domain).discountByCode(text)!;
    expect((await code(s, '7000000000000000001', text)).shopifyId).toBe(made.id);
    expect(made.input).toMatchObject({
      code: text,
      usageLimit: 1,
      appliesOncePerCustomer: true,
      context: { customers: { add: ['gid://shopify/Customer/7000000000000000001'] } },
      customerGets: { value: { percentage: 0.15 }, items: { all: true } },
      minimumRequirement: { subtotal: { greaterThanOrEqualToSubtotal: '40.00' } },
      combinesWith: { orderDiscounts: false, productDiscounts: false, shippingDiscounts: true },
    });
    expect(Date.parse(made.input.endsAt as string)).toBeGreaterThan(Date.now() + 29 * 86_400_000);
    expect(shopify.store(s.domain).callsTo('discountCodeBasicCreate').filter((c) => (c.variables as any).discount.code === text)).toHaveLength(1);
  });

  it('a cancelled code is deactivated in Shopify', async () => {
    await t.customer(s.shopId, '7000000000000000102', 1000);
    const text = await redeem(s, '7000000000000000102');
    await until(async () => (await code(s, '7000000000000000102', text)).shopifySync === 'synced', 10_000, 'synced');
    const res = await t.post(`/rest-api/v1/pointsRedemptions/${text}/cancel`, {}, s.apiKey);
    expect(res.status).toBe(200);
    const store = shopify.store(s.domain);
    await until(async () => store.discountStatus(store.discountByCode(text)!) === 'EXPIRED', 10_000, 'deactivated');
  });

  it('a code Shopify refuses is failed with Shopify\'s reason, cancelled, and its points come back once', async () => {
    const gift = await shopifyShop('Gift shop', { type: 'free_product', discountValue: 0, applyVariants: [] });
    expect((await connect(gift, { accessToken: shopify.store(gift.domain).addAccessToken([...REQUIRED_SCOPES]) })).userErrors).toEqual([]);
    await t.customer(gift.shopId, '7000000000000000104', 1000);
    // A variant id Shopify cannot read: its answer is a userError on the variant.
    const res = await t.post('/rest-api/v1/pointsRedemptions', { customerIdentifier: '7000000000000000104', rewardId: gift.rewardId, pointsAmount: 300, variantId: 'not-a-variant' }, gift.apiKey);
    expect(res.status).toBe(200);
    const text = ((await res.json()) as { discountCode: string }).discountCode;
    await until(async () => (await code(gift, '7000000000000000104', text)).shopifySync === 'failed', 10_000, '7000000000000000104');
    const refused = await code(gift, '7000000000000000104', text);
    expect(refused).toMatchObject({ status: 'cancelled', pointsReturned: true });
    expect(refused.shopifyError).toContain('ProductVariant with id: gid://shopify/ProductVariant/not-a-variant is invalid');
    expect(await points(gift, '7000000000000000104')).toBe(1000);
    expect((await view(gift)).codesFailed).toBe(1);
    // Not tried again: Shopify's answer would not change.
    await until(async () => (await t.app.database.db.selectFrom('shopify_sync_jobs').select('id').where('shop_id', '=', gift.shopId).where('kind', '=', 'code_create').where('failed_at', 'is', null).execute()).length === 0, 10_000, 'job done');
    expect(shopify.store(gift.domain).callsTo('discountCodeBasicCreate')).toHaveLength(1);
    expect((await checkLedger(t.app.database.db, gift.shopId)).problems).toEqual([]);
  });

  it('retries a store that answers 503, and is synced once it answers', async () => {
    await t.customer(s.shopId, '7000000000000000103', 1000);
    shopify.failNext(s.domain, { status: 503, times: 2 });
    const text = await redeem(s, '7000000000000000103');
    await until(async () => (await t.app.database.db.selectFrom('shopify_sync_jobs').select('attempts').where('shop_id', '=', s.shopId).where('kind', '=', 'code_create').execute()).some((j) => j.attempts >= 1), 10_000, 'first try');
    // The backoff (10 s, then 60 s) runs on the app's clock.
    for (let i = 0; i < 3 && (await code(s, '7000000000000000103', text)).shopifySync !== 'synced'; i++) {
      offset += 61_000;
      await until(async () => (await code(s, '7000000000000000103', text)).shopifySync === 'synced' || (await t.app.database.db.selectFrom('shopify_sync_jobs').select('due_at').where('shop_id', '=', s.shopId).where('kind', '=', 'code_create').executeTakeFirst())?.due_at.getTime()! > clock(), 10_000, 'retried');
    }
    await until(async () => (await code(s, '7000000000000000103', text)).shopifySync === 'synced', 10_000, 'synced after the outage');
    expect(shopify.store(s.domain).callsTo('discountCodeBasicCreate').filter((c) => (c.variables as any).discount.code === text && c.status === 200)).toHaveLength(1);
    expect((await checkLedger(t.app.database.db, s.shopId)).problems).toEqual([]);
    expect(await points(s, '7000000000000000103')).toBe(700);
  });

  // Last in the file: it moves the app's clock a month on.
  it('a code that expires here is deactivated in Shopify', async () => {
    await t.customer(s.shopId, '7000000000000000105', 1000);
    const text = await redeem(s, '7000000000000000105');
    await until(async () => (await code(s, '7000000000000000105', text)).shopifySync === 'synced', 10_000, 'synced');
    offset += 31 * 86_400_000;
    await until(async () => (await code(s, '7000000000000000105', text)).status === 'expired', 10_000, 'expired by the scheduler');
    const store = shopify.store(s.domain);
    await until(async () => store.discountStatus(store.discountByCode(text)!) === 'EXPIRED', 10_000, 'deactivated');
    expect(store.callsTo('discountCodeDeactivate').filter((c) => (c.variables as any).id === store.discountByCode(text)!.id)).toHaveLength(1);
  });
});
