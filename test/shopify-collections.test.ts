import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Migrator, sql } from 'kysely';
import { migrations } from '../migrations/index.js';
import { openDatabase } from '../src/db/database.js';
import { migrateToLatest } from '../src/db/migrate.js';
import { inTransaction } from '../src/db/transaction.js';
import { createShop } from '../src/domain/shops/index.js';
import { COLLECTIONS_RECONCILE_EVERY_MS, enqueueSyncJobs, reconcilePosition, recordReconcilePage, type SyncJob } from '../src/domain/shopify/index.js';
import { requestCollectionsReconcile } from '../src/domain/shopify/product-collections.js';
import { startTestApp, type TestApp } from './helpers.js';
import { until } from './live-helpers.js';
import { createShopifyAdminStandIn, type ShopifyAdminStandIn, type ShopifyStore } from './support/shopify-admin.ts';
import { deliverShopifyWebhook, shopifyJson } from './support/shopify-webhooks.js';

// Issue 34, item 4: which collections a connected store's products are in, read from the Admin API
// (the stand-in, whose ids pass 2^53), so earning rules' collection lists work for the connector's
// orders, whose webhooks name no collection.

const SECRET = 'shpss_collections_secret_0123';
const SCOPES = ['write_discounts', 'read_orders', 'read_customers', 'read_products'];
/** More than the reconcile's page of 50: the catalogue is read in two pages. */
const CATALOGUE = 60;

let shopify: ShopifyAdminStandIn;
let store: ShopifyStore;
let t: TestApp;
let shop: { shopId: string; apiKey: string };
let domain: string;
const ids = { sale: '', featured: '', gifts: '' };
/** Seeded products: [0] on Sale, [1] Featured, [3] in Gifts (sold as a gift card), the rest in none. */
const products: string[] = [];

const numeric = (gid: string) => gid.slice(gid.lastIndexOf('/') + 1);
const deliver = (topic: string, body: unknown) => deliverShopifyWebhook(t.url, domain, topic, typeof body === 'string' ? body : shopifyJson(body), { secret: SECRET });

let nextOrder = 1n;
let nextLine = 1n;
/** A Shopify order webhook body (Admin REST shape) with product ids as JSON numbers past 2^53. */
function orderBody(lines: Array<{ product: string; price: string; quantity?: number; giftCard?: boolean }>) {
  const id = 7_000_000_000_000_000_000n + nextOrder++;
  const total = lines.reduce((sum, l) => sum + Number(l.price) * (l.quantity ?? 1), 0).toFixed(2);
  const money = (amount: string) => ({ shop_money: { amount, currency_code: 'USD' }, presentment_money: { amount, currency_code: 'USD' } });
  return {
    id,
    body: shopifyJson({
      id,
      email: 'col@example.com',
      currency: 'USD',
      financial_status: 'paid',
      created_at: '2026-11-27T10:00:00Z',
      updated_at: '2026-11-27T10:00:00Z',
      processed_at: '2026-11-27T10:00:00Z',
      total_price: total,
      total_price_set: money(total),
      total_tax: '0.00',
      customer: { id: 8_100_000_000_000_000_001n, email: 'col@example.com' },
      line_items: lines.map((l) => ({
        id: 9_000_000_000_000_000_000n + nextLine++,
        product_id: BigInt(l.product),
        variant_id: null,
        quantity: l.quantity ?? 1,
        price: l.price,
        price_set: money(l.price),
        gift_card: l.giftCard ?? false,
        discount_allocations: [],
      })),
      refunds: [],
    }),
  };
}

async function orderOf(orderId: bigint) {
  const res = await fetch(`${t.url}/rest-api/v1/orders/${orderId}`, { headers: { authorization: `Bearer ${shop.apiKey}` } });
  return res.status === 200 ? ((await res.json()) as { order: { pointsEarned: number; lineItems: Array<{ productId: string; collectionIds: string[]; giftCard: boolean }> } }).order : null;
}

/** Delivers the order and waits until the connector has applied it. */
async function placeOrder(lines: Parameters<typeof orderBody>[0]) {
  const { id, body } = orderBody(lines);
  expect((await deliver('orders/paid', body)).status).toBe(200);
  // Polled in the database: REST reads would spend the shop's rate limit.
  const db = t.app.database.db;
  await until(async () => (await db.selectFrom('orders').select('id').where('shop_id', '=', shop.shopId).where('order_id', '=', String(id)).executeTakeFirst()) !== undefined, 20_000, `order ${id} applied`);
  const order = await orderOf(id);
  expect(order).not.toBeNull();
  return order!;
}

const membershipIn = async (shopId: string, productId: string) =>
  (await t.app.database.db.selectFrom('shopify_product_collections').select('collection_ids').where('shop_id', '=', shopId).where('product_id', '=', productId).executeTakeFirst())?.collection_ids;
const membership = (productId: string) => membershipIn(shop.shopId, productId);

async function rule(input: string) {
  const res = await t.graphql(shop.apiKey, `mutation { earningRuleCreate(input: { type: place_order, ${input} }) { earningRule { _id } userErrors { message } } }`);
  expect(res.data.earningRuleCreate.userErrors).toEqual([]);
  return res.data.earningRuleCreate.earningRule._id as string;
}

beforeAll(async () => {
  shopify = await createShopifyAdminStandIn();
  domain = `collections-${randomUUID().slice(0, 8)}.myshopify.com`;
  store = shopify.store(domain);
  const token = store.addAccessToken(SCOPES);
  const sale = store.seedCollection({ title: 'Sale' });
  const featured = store.seedCollection({ title: 'Featured' });
  const gifts = store.seedCollection({ title: 'Gifts' });
  Object.assign(ids, { sale: numeric(sale.id!), featured: numeric(featured.id!), gifts: numeric(gifts.id!) });
  for (let i = 0; i < CATALOGUE; i++) {
    const collections = i === 0 ? [sale.id!] : i === 1 ? [featured.id!] : i === 3 ? [gifts.id!] : [];
    products.push(numeric(store.seedProduct({ title: `Product ${i}`, collections }).id!));
  }

  t = await startTestApp({ SHOPIFY_ADMIN_BASE_URL: `${shopify.url}/stores/{shop}`, PUBLIC_URL: 'https://loyalty.example.com' });
  shop = await t.shop('Collections shop');
  // 1 point per $1, never for what is on sale; 10 more per $1 on featured products.
  await rule(`name: "Base", earnPoint: 1, spent: "1.00", excludeCollectionIds: ["${ids.sale}"]`);
  await rule(`name: "Featured", earnPoint: 10, spent: "1.00", includeCollectionIds: ["${ids.featured}"]`);

  const settings = await t.graphql(shop.apiKey, 'mutation($i: ShopifySettingsInput!) { shopifySettingsUpdate(input: $i) { userErrors { message } } }', { i: { shopDomain: domain, webhookSecret: SECRET } });
  expect(settings.data.shopifySettingsUpdate.userErrors).toEqual([]);
  const connected = await t.graphql(shop.apiKey, 'mutation($i: ShopifyAdminConnectInput!) { shopifyAdminConnect(input: $i) { shopifyAdmin { scopes } userErrors { code message } } }', { i: { accessToken: token } });
  expect(connected.data.shopifyAdminConnect.userErrors).toEqual([]);
}, 60_000);

afterAll(async () => {
  await t?.stop();
  await shopify?.close();
});

describe('collections read from the Admin API', () => {
  it('connecting reconciles the whole catalogue, page after page, ids past 2^53 kept as text; the product and collection webhooks are registered', async () => {
    const count = async () => Number((await t.app.database.db.selectFrom('shopify_product_collections').select((eb) => eb.fn.countAll<string>().as('n')).where('shop_id', '=', shop.shopId).executeTakeFirstOrThrow()).n);
    await until(async () => (await count()) === CATALOGUE, 20_000, 'the catalogue reconciled');
    expect(store.callsTo('products').length).toBeGreaterThanOrEqual(2);
    expect(BigInt(products[0]!)).toBeGreaterThan(2n ** 53n);
    expect(await membership(products[0]!)).toEqual([ids.sale]);
    expect(await membership(products[1]!)).toEqual([ids.featured]);
    expect(await membership(products[2]!)).toEqual([]);
    // The pass ended and the next is due in a day.
    const job = await t.app.database.db.selectFrom('shopify_sync_jobs').select(['due_at', 'attempts']).where('shop_id', '=', shop.shopId).where('kind', '=', 'collections_reconcile').executeTakeFirstOrThrow();
    expect(job.due_at.getTime()).toBeGreaterThan(Date.now() + 23 * 3_600_000);
    const view = await t.graphql(shop.apiKey, '{ shop { shopifyAdmin { productsRead collectionsReconciledAt } } }');
    expect(view.data.shop.shopifyAdmin).toEqual({ productsRead: CATALOGUE, collectionsReconciledAt: expect.any(String) });
    await until(() => ['PRODUCTS_UPDATE', 'PRODUCTS_CREATE', 'PRODUCTS_DELETE', 'COLLECTIONS_UPDATE', 'COLLECTIONS_DELETE'].every((topic) => [...store.webhooks.values()].some((w) => w.topic === topic)), 10_000, 'webhooks registered');
  });

  it('a connector order: a line in an excluded collection earns nothing, one in an included collection earns, the rest by the base rule', async () => {
    const order = await placeOrder([
      { product: products[0]!, price: '30.00' },
      { product: products[1]!, price: '20.00' },
      { product: products[2]!, price: '10.00' },
    ]);
    // Base: $20 + $10 (not the $30 on sale) = 30; Featured: $20 × 10 = 200.
    expect(order.pointsEarned).toBe(230);
    expect(order.lineItems.map((l) => l.collectionIds)).toEqual([[ids.sale], [ids.featured], []]);
    expect(order.lineItems[0]!.productId).toBe(products[0]);
  });

  it('products/update moves a product between collections: an order right after it waits for the read, and earns by the new collections', async () => {
    store.setProductCollections(`gid://shopify/Product/${products[0]}`, [`gid://shopify/Collection/${ids.featured}`]);
    expect((await deliver('products/update', { id: BigInt(products[0]!), title: 'Product 0', updated_at: new Date().toISOString() })).status).toBe(200);
    // Not waiting for the read to land: the order comes straight after the webhook.
    const order = await placeOrder([{ product: products[0]!, price: '30.00' }]);
    expect(order.lineItems[0]!.collectionIds).toEqual([ids.featured]);
    expect(order.pointsEarned).toBe(30 + 300);
    expect(await membership(products[0]!)).toEqual([ids.featured]);
  });

  it('an order for a product not read yet waits for its read rather than earning on a guess', async () => {
    const sale = `gid://shopify/Collection/${ids.sale}`;
    const fresh = numeric(store.seedProduct({ title: 'Arrived after the reconcile', collections: [sale] }).id!);
    expect(await membership(fresh)).toBeUndefined();
    const order = await placeOrder([{ product: fresh, price: '40.00' }, { product: products[2]!, price: '5.00' }]);
    expect(order.lineItems[0]!.collectionIds).toEqual([ids.sale]);
    expect(order.pointsEarned).toBe(5);
    expect(store.callsTo('product').length).toBeGreaterThanOrEqual(1);
  });

  it('a gift-card line earns nothing unless a rule includes gift cards', async () => {
    const without = await placeOrder([{ product: products[3]!, price: '50.00', giftCard: true }, { product: products[2]!, price: '10.00' }]);
    expect(without.lineItems[0]).toMatchObject({ giftCard: true, collectionIds: [ids.gifts] });
    expect(without.pointsEarned).toBe(10);
    await rule(`name: "Gift cards", earnPoint: 2, spent: "1.00", includeGiftCards: true, includeCollectionIds: ["${ids.gifts}"]`);
    const withRule = await placeOrder([{ product: products[3]!, price: '50.00', giftCard: true }, { product: products[2]!, price: '10.00' }]);
    // Base still leaves the gift card out: $10; the gift-card rule: $50 × 2.
    expect(withRule.pointsEarned).toBe(10 + 100);
  });

  it('collections/update (a smart collection\'s rules changed: its body does not say which products) reads the catalogue again', async () => {
    const passes = store.callsTo('products').length;
    store.setProductCollections(`gid://shopify/Product/${products[2]}`, [`gid://shopify/Collection/${ids.sale}`]);
    expect((await deliver('collections/update', { id: BigInt(ids.sale), title: 'Sale', updated_at: new Date().toISOString() })).status).toBe(200);
    await until(async () => (await membership(products[2]!))?.[0] === ids.sale, 20_000, 'the pass after collections/update');
    expect(store.callsTo('products').length).toBeGreaterThan(passes);
    const order = await placeOrder([{ product: products[2]!, price: '10.00' }]);
    expect(order.pointsEarned).toBe(0);
  });

  it('collections/delete takes the collection off every product here, without asking Shopify', async () => {
    const calls = store.calls.length;
    const fresh = numeric(store.seedProduct({ title: 'On sale too', collections: [`gid://shopify/Collection/${ids.sale}`] }).id!);
    await placeOrder([{ product: fresh, price: '1.00' }]);
    expect(await membership(fresh)).toEqual([ids.sale]);
    const readsBefore = store.calls.length;
    expect(readsBefore).toBeGreaterThan(calls);
    expect((await deliver('collections/delete', { id: BigInt(ids.sale), published_scope: 'web' })).status).toBe(200);
    await until(async () => (await membership(fresh))?.length === 0, 10_000, 'the sale collection forgotten');
    const order = await placeOrder([{ product: fresh, price: '7.00' }]);
    expect(order.pointsEarned).toBe(7);
    expect(store.calls.length).toBe(readsBefore);
  });

  it('disconnecting forgets what was read (nothing would keep it fresh): orders then earn without collections, at once', async () => {
    const res = await t.graphql(shop.apiKey, 'mutation { shopifyAdminDisconnect { userErrors { code message } } }');
    expect(res.data.shopifyAdminDisconnect.userErrors).toEqual([]);
    expect(await membership(products[0]!)).toBeUndefined();
    const calls = store.calls.length;
    const order = await placeOrder([{ product: products[0]!, price: '3.00' }]);
    expect(order.lineItems[0]!.collectionIds).toEqual([]);
    expect(order.pointsEarned).toBe(3);
    // Catalogue webhooks that were still registered change nothing and queue nothing.
    expect((await deliver('products/update', { id: BigInt(products[1]!), title: 'Product 1' })).status).toBe(200);
    await until(async () => (await t.app.database.db.selectFrom('shopify_inbox').select('id').where('shop_id', '=', shop.shopId).where('processed_at', 'is', null).execute()).length === 0, 10_000, 'the webhook applied');
    expect(await t.app.database.db.selectFrom('shopify_sync_jobs').select('kind').where('shop_id', '=', shop.shopId).execute()).toEqual([]);
    expect(await membership(products[1]!)).toBeUndefined();
    expect(store.calls.length).toBe(calls);
  });
});

describe('a store with a small bucket', () => {
  it('the reconcile waits for each page\'s cost instead of being throttled by Shopify', async () => {
    const small = `small-bucket-${randomUUID().slice(0, 8)}.myshopify.com`;
    const smallStore = shopify.store(small, { maximumAvailable: 1000, restoreRate: 100 });
    const token = smallStore.addAccessToken(SCOPES);
    // Every product in 10 collections: a page then costs all it reserved (652), nothing refunded.
    const tens = Array.from({ length: 10 }, (_, i) => smallStore.seedCollection({ title: `C${i}` }).id!);
    for (let i = 0; i < 100; i++) smallStore.seedProduct({ title: `Small ${i}`, collections: tens });
    const other = await t.shop('Small bucket shop');
    await t.graphql(other.apiKey, 'mutation($i: ShopifySettingsInput!) { shopifySettingsUpdate(input: $i) { userErrors { message } } }', { i: { shopDomain: small, webhookSecret: SECRET } });
    const connected = await t.graphql(other.apiKey, 'mutation($i: ShopifyAdminConnectInput!) { shopifyAdminConnect(input: $i) { userErrors { code message } } }', { i: { accessToken: token } });
    expect(connected.data.shopifyAdminConnect.userErrors).toEqual([]);
    const read = async () => Number((await t.app.database.db.selectFrom('shopify_product_collections').select((eb) => eb.fn.countAll<string>().as('n')).where('shop_id', '=', other.shopId).executeTakeFirstOrThrow()).n);
    await until(async () => (await read()) === 100, 30_000, 'the small store reconciled');
    // Two pages of 652 from a bucket of 1,000 refilled at 100 a second: the second waited for the bucket
    // to refill (about 3 s) instead of being sent to be throttled.
    const pages = smallStore.callsTo('products');
    expect(pages).toHaveLength(2);
    expect(pages[1]!.at - pages[0]!.at).toBeGreaterThan(2_000);
    expect(smallStore.calls.filter((c) => JSON.stringify(c.response ?? '').includes('THROTTLED'))).toEqual([]);
    expect((await membershipIn(other.shopId, numeric([...smallStore.memberships.keys()][0]!)))?.length).toBe(10);
  }, 40_000);
});

describe('the reconcile pass', () => {
  it('a collection changed during a pass does not restart it (a busy store would never finish one): another pass follows at once; a pass deletes what it did not see', async () => {
    const { shopId } = await t.shop('Reconciling shop');
    const db = t.app.database.db;
    // Its job, due in a year: the worker leaves it alone.
    await enqueueSyncJobs(db, [{ shopId, kind: 'collections_reconcile', subject: '' }], new Date(Date.now() + 365 * 86_400_000));
    const job = (await db.selectFrom('shopify_sync_jobs').selectAll().where('shop_id', '=', shopId).executeTakeFirstOrThrow()) as SyncJob;
    const page = (products: Array<{ productId: string; collectionIds: string[] }>, next: string | null) => ({ products, incomplete: [], next });
    const first = await reconcilePosition(db, shopId, new Date());
    expect(first.cursor).toBeNull();
    await recordReconcilePage(db, job, page([{ productId: '9007199254740993', collectionIds: ['5'] }], 'after-page-1'), first.startedAt, new Date());
    await inTransaction(db, (trx) => requestCollectionsReconcile(trx, shopId));
    expect(await reconcilePosition(db, shopId, new Date())).toEqual({ cursor: 'after-page-1', startedAt: first.startedAt });
    const dueAfterFirst = await recordReconcilePage(db, job, page([], null), first.startedAt, new Date());
    expect(dueAfterFirst.getTime()).toBeLessThanOrEqual(Date.now());

    // The pass that followed did not see the product (deleted in Shopify meanwhile): it goes; the next pass is in a day.
    const second = await reconcilePosition(db, shopId, new Date(Date.now() + 5));
    expect(second.cursor).toBeNull();
    const dueAfterSecond = await recordReconcilePage(db, job, page([], null), second.startedAt, new Date(Date.now() + 5));
    expect(dueAfterSecond.getTime()).toBeGreaterThanOrEqual(Date.now() + COLLECTIONS_RECONCILE_EVERY_MS - 60_000);
    expect(await db.selectFrom('shopify_product_collections').select('product_id').where('shop_id', '=', shopId).execute()).toEqual([]);
  });
});

describe('the migration', () => {
  it('queues a first pass for the stores connected before it', async () => {
    const handle = await openDatabase({ dataDir: 'memory://' });
    try {
      const { db } = handle;
      const before = Object.fromEntries(Object.entries(migrations).filter(([name]) => name < '2026_11_27_023'));
      expect((await new Migrator({ db, provider: { getMigrations: async () => before } }).migrateToLatest()).error).toBeUndefined();
      const [connected, other] = [(await createShop(db, 'Connected')).shop.id, (await createShop(db, 'Webhooks only')).shop.id];
      await sql`update shops set shopify_domain = id || '.myshopify.com' where id in (${connected}, ${other})`.execute(db);
      await sql`insert into shopify_admin_connections (shop_id, auth, access_token) values (${connected}, 'access_token', 'sealed')`.execute(db);
      await migrateToLatest(db);
      const jobs = await db.selectFrom('shopify_sync_jobs').select(['id', 'shop_id', 'kind', 'subject']).execute();
      expect(jobs).toEqual([{ id: expect.stringMatching(/^[0-9a-f]{24}$/), shop_id: connected, kind: 'collections_reconcile', subject: '' }]);
    } finally {
      await handle.close();
    }
  });
});
