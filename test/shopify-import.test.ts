import { spawn } from 'node:child_process';
import { createHmac, randomBytes, randomUUID } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type DB, openDatabase } from '../src/db/database.js';
import { DomainError } from '../src/domain/kernel/index.js';
import { createEarningRule } from '../src/domain/program/earning-rules.js';
import { saveAdminConnection, setShopifyConnection, shopifyImportOf } from '../src/domain/shopify/index.js';
import { createShop } from '../src/domain/shops/shops.js';
import { migrateToLatest } from '../src/db/migrate.js';
import { SHOPIFY_WEBHOOKS_PATH } from '../src/rest/shopify-webhooks.js';
import { importShopifyHistory } from '../src/shopify-admin/history-import.js';
import { createSecretBox } from '../src/webhooks/secret-box.js';
import { cliDatabase, onPostgres, startTestApp, type TestApp } from './helpers.js';
import { until } from './live-helpers.js';
import { createShopifyAdminStandIn, moneyBag, type ShopifyAdminStandIn, type ShopifyStore } from './support/shopify-admin.js';

// `shopify import --since` (issue 34, item 5) against the Admin API stand-in, which runs the bulk
// operations on what each test seeds and serves their JSONL; the connector's webhooks are
// delivered to the real POST /integrations/shopify/webhooks with a valid HMAC.

const ROOT = path.resolve(import.meta.dirname, '..');
const SECRETS_KEY = randomBytes(32).toString('hex');
const WEBHOOK_SECRET = 'shpss_import_secret_0123456789';
const SCOPES = ['write_discounts', 'read_orders', 'read_customers', 'read_products'];
const SINCE = '2026-06-01T00:00:00Z';
const secrets = createSecretBox(Buffer.from(SECRETS_KEY, 'hex'));

let shopify: ShopifyAdminStandIn;
let t: TestApp;
const baseUrl = () => `${shopify.url}/stores/{shop}`;

beforeAll(async () => {
  shopify = await createShopifyAdminStandIn();
  t = await startTestApp({ SHOPIFY_ADMIN_BASE_URL: baseUrl(), SECRETS_KEY });
});
afterAll(async () => {
  await t?.stop();
  await shopify?.close();
});

type Shop = { shopId: string; apiKey: string; domain: string; store: ShopifyStore };

/** A shop earning 1 point per $1, its webhooks signed with WEBHOOK_SECRET, connected to its store in the stand-in unless told not to. */
async function connectedShop(app: TestApp, name: string, admin = true): Promise<Shop> {
  const s = await app.shop(name);
  const rule = await app.graphql(s.apiKey, 'mutation { earningRuleCreate(input: { type: place_order, name: "1 pt per $1", earnPoint: 1, spent: "1.00" }) { userErrors { message } } }');
  expect(rule.data.earningRuleCreate.userErrors).toEqual([]);
  const domain = `${name.toLowerCase().replace(/[^a-z0-9]+/g, '-')}-${randomUUID().slice(0, 8)}.myshopify.com`;
  const settings = await app.graphql(s.apiKey, 'mutation($i: ShopifySettingsInput!) { shopifySettingsUpdate(input: $i) { userErrors { message } } }', { i: { shopDomain: domain, webhookSecret: WEBHOOK_SECRET } });
  expect(settings.data.shopifySettingsUpdate.userErrors).toEqual([]);
  const store = shopify.store(domain);
  if (admin) {
    const token = store.addAccessToken(SCOPES);
    const connected = await app.graphql(s.apiKey, 'mutation($t: String!) { shopifyAdminConnect(input: { accessToken: $t }) { userErrors { code message } } }', { t: token });
    expect(connected.data.shopifyAdminConnect.userErrors).toEqual([]);
  }
  return { ...s, domain, store };
}

/** Cents as Shopify's money text. */
const dollars = (cents: number) => `${Math.floor(cents / 100)}.${String(cents % 100).padStart(2, '0')}`;
const numericId = (gid: string) => gid.slice(gid.lastIndexOf('/') + 1);

function seedCustomer(store: ShopifyStore, email: string, createdAt: string) {
  return store.seedCustomer({ email, defaultEmailAddress: { emailAddress: email }, createdAt, updatedAt: createdAt });
}

type SeedLine = { cents: number; quantity: number; refunded?: number };
type SeededOrder = ReturnType<ShopifyStore['seedOrder']>;
let refundIds = 7_000_000_000_000_000_001n;

/** An order in the Admin API's shape: paid (or refunded by `refundCents`), its lines at `cents` each. */
function seedOrder(store: ShopifyStore, o: { customer: ReturnType<ShopifyStore['seedCustomer']> | null; createdAt: string; lines: SeedLine[]; refundCents?: number }): SeededOrder {
  const total = o.lines.reduce((sum, l) => sum + l.cents * l.quantity, 0);
  return store.seedOrder({
    customer: o.customer?.id ?? null,
    email: (o.customer?.email as string | undefined) ?? null,
    createdAt: o.createdAt,
    updatedAt: o.createdAt,
    displayFinancialStatus: o.refundCents ? 'PARTIALLY_REFUNDED' : 'PAID',
    totalPriceSet: moneyBag(dollars(total)),
    totalTaxSet: moneyBag('0.00'),
    totalShippingPriceSet: moneyBag('0.00'),
    refunds: o.refundCents ? [{ legacyResourceId: String(refundIds++), createdAt: o.createdAt, totalRefundedSet: moneyBag(dollars(o.refundCents)) }] : [],
    lineItems: o.lines.map((l) => ({ title: 'Hat', quantity: l.quantity, currentQuantity: l.quantity - (l.refunded ?? 0), originalUnitPriceSet: moneyBag(dollars(l.cents)), discountAllocations: [] })),
  });
}

/** The same order as Shopify's order webhooks carry it (REST shape, numeric ids past 2^53 as JSON numbers). */
function webhookBody(order: SeededOrder, customer: ReturnType<ShopifyStore['seedCustomer']>, updatedAt: string): string {
  const lines = order.lineItems as Array<Record<string, any>>;
  const money = (amount: string) => ({ shop_money: { amount, currency_code: 'USD' }, presentment_money: { amount, currency_code: 'USD' } });
  const total = (order.totalPriceSet as { shopMoney: { amount: string } }).shopMoney.amount;
  const body = {
    id: `#${numericId(order.id!)}`,
    email: customer.email,
    created_at: order.createdAt,
    updated_at: updatedAt,
    processed_at: order.createdAt,
    cancelled_at: null,
    currency: 'USD',
    financial_status: 'paid',
    total_price: total,
    total_price_set: money(total),
    total_tax: '0.00',
    total_shipping_price_set: money('0.00'),
    customer: { id: `#${numericId(customer.id!)}`, email: customer.email, created_at: customer.createdAt, updated_at: customer.updatedAt },
    line_items: lines.map((l) => ({
      id: `#${numericId(l.id)}`,
      product_id: null,
      variant_id: null,
      quantity: l.quantity,
      price: l.originalUnitPriceSet.shopMoney.amount,
      price_set: money(l.originalUnitPriceSet.shopMoney.amount),
      discount_allocations: [],
    })),
    refunds: [],
    discount_codes: [],
  };
  return JSON.stringify(body).replace(/"#(\d+)"/g, '$1');
}

/** Delivers a webhook as Shopify does, and waits until the connector has applied it. */
async function deliver(app: TestApp, shop: Shop, topic: string, raw: string): Promise<void> {
  const webhookId = randomUUID();
  const res = await fetch(`${app.url}${SHOPIFY_WEBHOOKS_PATH}`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      'x-shopify-topic': topic,
      'x-shopify-hmac-sha256': createHmac('sha256', WEBHOOK_SECRET).update(raw).digest('base64'),
      'x-shopify-shop-domain': shop.domain,
      'x-shopify-webhook-id': webhookId,
      'x-shopify-triggered-at': new Date().toISOString(),
    },
    body: raw,
  });
  expect(res.status).toBe(200);
  const db = app.app.database.db;
  const row = () => db.selectFrom('shopify_inbox').select(['processed_at', 'error']).where('shop_id', '=', shop.shopId).where('webhook_id', '=', webhookId).executeTakeFirst();
  await until(async () => (await row())?.processed_at != null, 15_000, `${topic} applied`);
  expect((await row())?.error).toBeNull();
}

const importOnce = (app: TestApp, shop: Shop, since = SINCE) =>
  importShopifyHistory({ db: app.app.database.db, secrets, urls: { baseUrlTemplate: baseUrl() }, shopId: shop.shopId, since: new Date(since), batchSize: 2 });

/** Everything the import writes for a shop: customers, orders and the ledger, as rows. */
async function snapshot(db: DB, shopId: string) {
  const customers = await db.selectFrom('customers').selectAll().where('shop_id', '=', shopId).orderBy('shopify_customer_id').execute();
  const orders = await db.selectFrom('orders').selectAll().where('shop_id', '=', shopId).orderBy('order_id').execute();
  const ledger = await db.selectFrom('activities').selectAll().where('shop_id', '=', shopId).orderBy('seq').execute();
  return { customers, orders, ledger };
}

const pointsOf = async (db: DB, shopId: string) =>
  Object.fromEntries((await db.selectFrom('customers').select(['email', 'points']).where('shop_id', '=', shopId).execute()).map((c) => [c.email, c.points]));

describe('shopify import', () => {
  it('brings the customers and orders created since the date, with their points; a second run changes nothing', async () => {
    const shop = await connectedShop(t, 'History');
    const ann = seedCustomer(shop.store, 'ann@example.com', '2026-07-01T10:00:00Z');
    const bob = seedCustomer(shop.store, 'bob@example.com', '2026-07-02T10:00:00Z');
    // Signed up before the date: not among the customers imported, but brought by an order of theirs since.
    const old = seedCustomer(shop.store, 'old@example.com', '2025-01-01T10:00:00Z');
    const oldOnly = seedCustomer(shop.store, 'old-only@example.com', '2025-01-02T10:00:00Z');
    seedOrder(shop.store, { customer: ann, createdAt: '2026-07-03T10:00:00Z', lines: [{ cents: 1500, quantity: 2 }] });
    // Two $20 hats, one refunded with its money: earns on the one kept.
    const refunded = seedOrder(shop.store, { customer: bob, createdAt: '2026-07-04T10:00:00Z', lines: [{ cents: 2000, quantity: 2, refunded: 1 }], refundCents: 2000 });
    seedOrder(shop.store, { customer: old, createdAt: '2026-07-05T10:00:00Z', lines: [{ cents: 1250, quantity: 1 }, { cents: 750, quantity: 1 }] });
    seedOrder(shop.store, { customer: null, createdAt: '2026-07-06T10:00:00Z', lines: [{ cents: 9900, quantity: 1 }] });
    seedOrder(shop.store, { customer: oldOnly, createdAt: '2025-03-01T10:00:00Z', lines: [{ cents: 5000, quantity: 1 }] });

    const first = await importOnce(t, shop);
    expect(first.resumed).toBe(false);
    expect(first.state).toMatchObject({ phase: 'done', customersApplied: 2, ordersApplied: 3, ordersSkipped: 1, error: null });
    expect(first.skipped).toEqual([expect.objectContaining({ reason: expect.stringContaining('shopify_order_without_customer') })]);

    const db = t.app.database.db;
    expect(await pointsOf(db, shop.shopId)).toEqual({ 'ann@example.com': 30, 'bob@example.com': 20, 'old@example.com': 20 });
    const refundedRow = await db.selectFrom('orders').selectAll().where('shop_id', '=', shop.shopId).where('order_id', '=', numericId(refunded.id!)).executeTakeFirstOrThrow();
    expect(refundedRow.status).toBe('partially_refunded');
    expect((await db.selectFrom('customers').select('shopify_customer_id').where('shop_id', '=', shop.shopId).execute()).map((c) => c.shopify_customer_id).sort()).toEqual(
      [ann, bob, old].map((c) => numericId(c.id!)).sort(),
    );
    // Two bulk operations (customers, orders), each asked for by id until done; the date in their filters.
    const runs = shop.store.callsTo('bulkOperationRunQuery').map((c) => String(c.variables?.query));
    expect(runs).toHaveLength(2);
    expect(runs.every((q) => q.includes(`created_at:>='2026-06-01T00:00:00.000Z'`))).toBe(true);

    const before = await snapshot(db, shop.shopId);
    const second = await importOnce(t, shop);
    expect(second).toMatchObject({ resumed: false, customers: 2, orders: 3, skippedCount: 1 });
    expect(await snapshot(db, shop.shopId)).toEqual(before);
  });

  it('an order imported and then delivered by a webhook is one order, and earns once', async () => {
    const shop = await connectedShop(t, 'Import first');
    const ann = seedCustomer(shop.store, 'ann@example.com', '2026-07-01T10:00:00Z');
    const order = seedOrder(shop.store, { customer: ann, createdAt: '2026-07-03T10:00:00Z', lines: [{ cents: 1500, quantity: 2 }] });
    await importOnce(t, shop);
    const db = t.app.database.db;
    const imported = await snapshot(db, shop.shopId);
    expect(imported.orders).toHaveLength(1);
    expect(await pointsOf(db, shop.shopId)).toEqual({ 'ann@example.com': 30 });

    // The same state, and a later one that changes nothing the points go by (orders/paid after the import).
    await deliver(t, shop, 'orders/create', webhookBody(order, ann, order.updatedAt as string));
    await deliver(t, shop, 'orders/paid', webhookBody(order, ann, '2026-07-03T11:00:00Z'));
    const after = await snapshot(db, shop.shopId);
    expect(after.orders.map((o) => [o.order_id, o.status])).toEqual([[numericId(order.id!), 'paid']]);
    expect(after.ledger).toEqual(imported.ledger);
    expect(await pointsOf(db, shop.shopId)).toEqual({ 'ann@example.com': 30 });

    // An import after the webhooks brings the older state: it changes nothing either.
    await importOnce(t, shop);
    expect((await snapshot(db, shop.shopId)).ledger).toEqual(imported.ledger);
  });

  it('an order delivered by a webhook and then imported is one order, and earns once', async () => {
    const shop = await connectedShop(t, 'Webhook first');
    const ann = seedCustomer(shop.store, 'ann@example.com', '2026-07-01T10:00:00Z');
    const order = seedOrder(shop.store, { customer: ann, createdAt: '2026-07-03T10:00:00Z', lines: [{ cents: 1250, quantity: 4 }] });
    await deliver(t, shop, 'orders/create', webhookBody(order, ann, order.updatedAt as string));
    const db = t.app.database.db;
    const delivered = await snapshot(db, shop.shopId);
    expect(await pointsOf(db, shop.shopId)).toEqual({ 'ann@example.com': 50 });

    const result = await importOnce(t, shop);
    expect(result.state).toMatchObject({ phase: 'done', customersApplied: 1, ordersApplied: 1 });
    expect(await snapshot(db, shop.shopId)).toEqual(delivered);
    // The webhook's body, Shopify's own REST shape, is what the connector keeps for the order.
    const stored = await db.selectFrom('shopify_orders').select(sql<string>`order_body->>'financial_status'`.as('status')).where('shop_id', '=', shop.shopId).executeTakeFirstOrThrow();
    expect(stored.status).toBe('paid');
  });

  it('webhooks of the same orders racing the import leave each order once, earning once', async () => {
    const shop = await connectedShop(t, 'Racing');
    const customers = Array.from({ length: 4 }, (_, i) => seedCustomer(shop.store, `r${i}@example.com`, '2026-07-01T10:00:00Z'));
    const orders = Array.from({ length: 40 }, (_, i) =>
      seedOrder(shop.store, { customer: customers[i % 4]!, createdAt: `2026-07-02T10:${String(i).padStart(2, '0')}:00Z`, lines: [{ cents: 100 * (1 + (i % 5)), quantity: 1 }] }),
    );
    // Each order's orders/create, and for half of them a later orders/paid, delivered while the import applies them.
    const webhooks = Promise.all(
      orders.flatMap((order, i) => {
        const customer = customers[i % 4]!;
        const create = deliver(t, shop, 'orders/create', webhookBody(order, customer, order.updatedAt as string));
        return i % 2 ? [create] : [create, deliver(t, shop, 'orders/paid', webhookBody(order, customer, '2026-07-03T00:00:00Z'))];
      }),
    );
    const [result] = await Promise.all([importOnce(t, shop), webhooks]);
    expect(result.state).toMatchObject({ phase: 'done', ordersApplied: 40 });
    const db = t.app.database.db;
    const { orders: rows, ledger } = await snapshot(db, shop.shopId);
    expect(rows).toHaveLength(40);
    expect(ledger).toHaveLength(40);
    const expected = Object.fromEntries(customers.map((c, k) => [c.email, orders.reduce((sum, _o, i) => (i % 4 === k ? sum + 1 + (i % 5) : sum), 0)]));
    expect(await pointsOf(db, shop.shopId)).toEqual(expected);
  });

  it('a bulk operation that fails stops the run with Shopify\'s reason; the next run starts it anew, and a result gone is asked for again', async () => {
    const shop = await connectedShop(t, 'Failing');
    const ann = seedCustomer(shop.store, 'ann@example.com', '2026-07-01T10:00:00Z');
    seedOrder(shop.store, { customer: ann, createdAt: '2026-07-03T10:00:00Z', lines: [{ cents: 1000, quantity: 1 }] });
    shop.store.bulkProgress = 'manual';
    const run = () => importShopifyHistory({ db: t.app.database.db, secrets, urls: { baseUrlTemplate: baseUrl() }, shopId: shop.shopId, since: new Date(SINCE), maxPollMs: 50 });
    const failing = run().catch((err: unknown) => err);
    await until(() => shop.store.bulkOperations.size === 1, 10_000, 'the customers\' bulk operation');
    const [op] = shop.store.bulkOperations.values();
    op!.errorCode = 'TIMEOUT';
    shop.store.advanceBulkOperations();
    shop.store.advanceBulkOperations();
    expect(await failing).toMatchObject({ code: 'shopify_bulk_operation_failed', message: expect.stringContaining('ended FAILED (TIMEOUT)') });
    const db = t.app.database.db;
    expect(await shopifyImportOf(db, shop.shopId)).toMatchObject({ phase: 'customers', bulkOperationId: null, error: expect.stringContaining('TIMEOUT') });

    // The customers' phase done, the orders' result no longer there (Shopify keeps it a week).
    shop.store.bulkProgress = 'auto';
    const gone = `${shopify.url}/bulk-results/404.jsonl`;
    await db.updateTable('shopify_imports').set({ phase: 'orders', bulk_operation_id: 'gid://shopify/BulkOperation/1', result_url: gone, object_count: 2, lines_applied: 0 }).where('shop_id', '=', shop.shopId).execute();
    const resumed = await run();
    expect(resumed).toMatchObject({ resumed: true, orders: 1, state: { phase: 'done', ordersApplied: 1, error: null } });
    expect(shop.store.callsTo('bulkOperationRunQuery')).toHaveLength(2);
    expect(await pointsOf(db, shop.shopId)).toEqual({ 'ann@example.com': 10 });
  });

  it('a shop without an Admin API connection is told to connect first, and nothing starts', async () => {
    const shop = await connectedShop(t, 'Unconnected', false);
    const failure = await importOnce(t, shop).catch((err: unknown) => err);
    expect(failure).toBeInstanceOf(DomainError);
    expect(failure).toMatchObject({ code: 'shopify_admin_not_connected', message: expect.stringContaining('connect it first') });
    expect(await shopifyImportOf(t.app.database.db, shop.shopId)).toBeNull();
  });
});

// --- the CLI, killed mid-import ------------------------------------------------------------------

/**
 * Stands between the CLI and the stand-in: passes the Admin API through, and serves the bulk
 * operations' results a few lines at a time (counting them), so a test can kill the CLI while it
 * is halfway through a file.
 */
async function slowResults(target: string, linesPerTick: number, tickMs: number) {
  const state = { sent: 0, total: 0, started: 0 };
  let origin = '';
  const server: Server = createServer((req, res) => {
    void (async () => {
      const chunks: Buffer[] = [];
      for await (const chunk of req) chunks.push(chunk as Buffer);
      if (req.url!.startsWith('/results/')) {
        const lines = (await (await fetch(decodeURIComponent(req.url!.slice('/results/'.length)))).text()).split('\n').filter(Boolean);
        Object.assign(state, { sent: 0, total: lines.length, started: Date.now() });
        res.writeHead(200, { 'content-type': 'application/jsonl' });
        for (let i = 0; i < lines.length && !res.destroyed; i += linesPerTick) {
          res.write(lines.slice(i, i + linesPerTick).map((l) => `${l}\n`).join(''));
          state.sent = Math.min(lines.length, i + linesPerTick);
          await new Promise((r) => setTimeout(r, tickMs));
        }
        res.end();
        return;
      }
      const headers: Record<string, string> = { 'content-type': String(req.headers['content-type'] ?? 'application/json') };
      if (req.headers['x-shopify-access-token']) headers['x-shopify-access-token'] = String(req.headers['x-shopify-access-token']);
      const upstream = await fetch(`${target}${req.url}`, { method: req.method, headers, body: req.method === 'POST' ? Buffer.concat(chunks) : undefined });
      const text = (await upstream.text()).replace(/"url":"([^"]+)"/g, (_m, url: string) => `"url":"${origin}/results/${encodeURIComponent(url)}"`);
      res.writeHead(upstream.status, { 'content-type': 'application/json' });
      res.end(text);
    })().catch((err: unknown) => res.destroy(err as Error));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return { url: origin, state, close: () => new Promise<void>((resolve) => server.close(() => resolve())) };
}

describe('shopify import in the CLI', () => {
  let dataDir: string;
  let dbEnv: Record<string, string>;
  let cliDb: Awaited<ReturnType<typeof cliDatabase>> | undefined;

  beforeAll(async () => {
    cliDb = await cliDatabase('loyalty-shopify-import-');
    ({ env: dbEnv, dataDir } = cliDb);
  });
  afterAll(() => cliDb?.drop());

  const withDb = async <T>(fn: (db: DB) => Promise<T>): Promise<T> => {
    const handle = await openDatabase(onPostgres ? { url: dbEnv.DATABASE_URL } : { dataDir });
    try {
      return await fn(handle.db);
    } finally {
      await handle.close();
    }
  };

  function cli(args: string[], env: Record<string, string>) {
    // Node itself with tsx loaded, so SIGKILL reaches the process doing the import (the tsx binary runs it in a child).
    const child = spawn(process.execPath, ['--import', 'tsx', 'src/cli/main.ts', ...args], { cwd: ROOT, env: { ...process.env, ...dbEnv, SECRETS_KEY, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    const done = new Promise<{ code: number | null; signal: NodeJS.Signals | null; stdout: string; stderr: string }>((resolve, reject) => {
      child.on('error', reject);
      child.on('close', (code, signal) => resolve({ code, signal, stdout, stderr }));
    });
    return { child, done };
  }

  it('killed with SIGKILL halfway through the orders, a rerun resumes and every order is there once, earning once', { timeout: 240_000 }, async () => {
    const ORDERS = 300;
    // The shops are set up on the database the CLI then uses; one connects as a Dev Dashboard app,
    // its token lapsed, so the import renews it by the client-credentials grant first.
    const setUp = async (db: DB, name: string, admin: boolean): Promise<Shop> => {
      const { shop: created } = await createShop(db, name);
      await createEarningRule(db, created.id, { type: 'place_order', name: '1 pt per $1', earnPoint: 1, spent: '1.00' });
      const domain = `${name.toLowerCase().replace(/[^a-z0-9]+/g, '-')}-${randomUUID().slice(0, 8)}.myshopify.com`;
      const store = shopify.store(domain);
      await setShopifyConnection(db, secrets, created.id, { shopDomain: domain, webhookSecret: WEBHOOK_SECRET });
      if (admin) {
        const { clientId, clientSecret } = store.addClientApp({ scopes: SCOPES });
        await saveAdminConnection(db, secrets, created.id, { auth: 'client_credentials', clientId, clientSecret }, { accessToken: 'shpat_lapsed', expiresAt: new Date(Date.now() - 1000) }, SCOPES);
      }
      return { shopId: created.id, apiKey: '', domain, store };
    };
    const [shop, unconnected] = await withDb(async (db) => {
      await migrateToLatest(db);
      return [await setUp(db, 'Killed', true), await setUp(db, 'Never connected', false)];
    });
    const customers = Array.from({ length: 10 }, (_, i) => seedCustomer(shop.store, `c${i}@example.com`, `2026-07-01T10:00:${String(i).padStart(2, '0')}Z`));
    for (let i = 0; i < ORDERS; i++) {
      const at = new Date(Date.parse('2026-07-02T00:00:00Z') + i * 60_000).toISOString().replace(/\.\d{3}Z$/, 'Z');
      seedOrder(shop.store, { customer: customers[i % customers.length]!, createdAt: at, lines: [{ cents: 100 * (1 + (i % 7)), quantity: 1 }] });
    }
    const expected = new Map<string, number>();
    for (let i = 0; i < ORDERS; i++) expected.set(`c${i % 10}@example.com`, (expected.get(`c${i % 10}@example.com`) ?? 0) + 1 + (i % 7));

    const proxy = await slowResults(shopify.url, 10, 50);
    // PostgreSQL can be watched while the CLI runs; PGlite's folder is the CLI's alone.
    const pg = onPostgres ? await openDatabase({ url: dbEnv.DATABASE_URL }) : undefined;
    try {
      const env = { SHOPIFY_ADMIN_BASE_URL: `${proxy.url}/stores/{shop}` };
      const args = ['shopify', 'import', '--shop', shop.shopId, '--since', '2026-06-01', '--batch-size', '10', '--json'];

      const refused = await cli(['shopify', 'import', '--shop', unconnected.shopId, '--since', '2026-06-01', '--json'], env).done;
      expect(refused.code).toBe(1);
      expect(JSON.parse(refused.stdout)).toMatchObject({ error: 'shopify_admin_not_connected' });

      const badDate = await cli(['shopify', 'import', '--shop', shop.shopId, '--since', '2026-02-30'], env).done;
      expect([badDate.code, badDate.stderr]).toEqual([1, expect.stringContaining('expected a date such as 2026-01-01')]);

      const killed = cli(args, env);
      // Half the orders' file served (its customers' file has 10 lines), and batches of it committed.
      await until(() => proxy.state.total === ORDERS * 2 && proxy.state.sent >= ORDERS, 60_000, 'half the orders served');
      if (pg) await until(async () => ((await shopifyImportOf(pg.db, shop.shopId))?.linesApplied ?? 0) > 0, 10_000, 'a batch committed');
      else await new Promise((r) => setTimeout(r, 300));
      killed.child.kill('SIGKILL');
      expect((await killed.done).signal).toBe('SIGKILL');

      const halfway = await withDb((db) => shopifyImportOf(db, shop.shopId));
      expect(halfway).toMatchObject({ phase: 'orders', objectCount: ORDERS * 2 });
      expect(halfway!.linesApplied).toBeGreaterThan(0);
      expect(halfway!.linesApplied).toBeLessThan(ORDERS * 2);

      const rerun = await cli(args, env).done;
      expect(rerun.code, rerun.stderr).toBe(0);
      const out = JSON.parse(rerun.stdout);
      expect(out).toMatchObject({ phase: 'done', resumed: true, customersApplied: 10, ordersApplied: ORDERS, ordersSkipped: 0 });
      // The rerun applied only what the killed run had not committed.
      expect(out.run.orders).toBe(ORDERS - halfway!.linesApplied / 2);
    } finally {
      await proxy.close();
      await pg?.close();
    }

    await withDb(async (db) => {
      const orders = await db.selectFrom('orders').select(['order_id']).where('shop_id', '=', shop.shopId).execute();
      expect(orders).toHaveLength(ORDERS);
      expect(new Set(orders.map((o) => o.order_id)).size).toBe(ORDERS);
      // One ledger entry per order: nothing earned twice.
      const entries = await db.selectFrom('activities').select(db.fn.countAll<number>().as('n')).where('shop_id', '=', shop.shopId).executeTakeFirstOrThrow();
      expect(Number(entries.n)).toBe(ORDERS);
      expect(await pointsOf(db, shop.shopId)).toEqual(Object.fromEntries(expected));
    });
  });
});
