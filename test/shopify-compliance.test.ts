import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SHOP_TABLES } from '../src/domain/shop-exit/index.js';
import { startTestApp, type TestApp } from './helpers.js';
import { fillShop, shopIdTables, shopRowCounts } from './support/shop-data.js';
import { deliverShopifyWebhook, type ShopifyDeliveryOptions } from './support/shopify-webhooks.js';

// Shopify's mandatory compliance webhooks (issue 37, item 4) end to end: signed as Shopify signs
// them, through the real route, applied by the scheduler, answered through the REST API.

const SECRET = 'shpss_compliance_secret_0123456789';
const DAY = 24 * 60 * 60 * 1000;

let t: TestApp;
// The scheduler's clock: real time, moved on by `skipped` to pass the grace.
let skipped = 0;
const clock = () => Date.now() + skipped;
type Shop = { shopId: string; apiKey: string; domain: string };
let a: Shop;
let b: Shop;

async function connectedShop(name: string): Promise<Shop> {
  const s = await t.shop(name);
  const domain = `${name.toLowerCase().replace(/[^a-z0-9]+/g, '-')}-${randomUUID().slice(0, 8)}.myshopify.com`;
  const res = await t.graphql(s.apiKey, 'mutation($i: ShopifySettingsInput!) { shopifySettingsUpdate(input: $i) { userErrors { code } } }', { i: { shopDomain: domain, webhookSecret: SECRET } });
  expect(res.data.shopifySettingsUpdate.userErrors).toEqual([]);
  return { ...s, domain };
}

const deliver = (s: Shop, topic: string, body: unknown, options: ShopifyDeliveryOptions = {}) =>
  deliverShopifyWebhook(t.url, s.domain, topic, body, { ...options, secret: options.secret ?? SECRET });

const get = async (s: Shop, path: string) => {
  const res = await fetch(`${t.url}/rest-api/v1${path}`, { headers: { authorization: `Bearer ${s.apiKey}` } });
  return { status: res.status, body: (await res.json()) as any };
};

const requests = async (s: Shop) => (await get(s, '/complianceRequests')).body.complianceRequests as Array<Record<string, any>>;

beforeAll(async () => {
  t = await startTestApp({ WORKER: 'off' }, { clock });
  a = await connectedShop('Compliance A');
  b = await connectedShop('Compliance B');
});
afterAll(() => t?.stop());

describe('customers/data_request and customers/redact', () => {
  it('a bad HMAC is refused (401) and stores nothing', async () => {
    const res = await deliver(a, 'customers/redact', { shop_id: 1, shop_domain: a.domain, customer: { id: 1, email: 'x@example.com' }, orders_to_redact: [] }, { secret: 'not-the-secret' });
    expect(res.status).toBe(401);
    expect(await t.app.scheduler.runDue()).toBe(0);
    expect(await requests(a)).toEqual([]);
  });

  it('data_request keeps the customer\'s export for the shop; redact erases them, and the kept export with them', async () => {
    await t.customer(a.shopId, '7001', 120);
    const person = { id: 7001, email: '7001@example.com', phone: '555-625-1199' };
    const asked = await deliver(a, 'customers/data_request', { shop_id: 954889, shop_domain: a.domain, orders_requested: [299938, 280263], customer: person, data_request: { id: 9999 } });
    expect(asked.status).toBe(200);
    expect(await asked.json()).toMatchObject({ status: 'accepted' });
    await t.app.scheduler.runDue();

    const [request] = await requests(a);
    expect(request).toEqual({ _id: expect.any(String), topic: 'customers/data_request', outcome: 'exported', customer: expect.any(String), shopifyDataRequestId: '9999', ordersRequested: ['299938', '280263'], receivedAt: expect.any(String) });
    const kept = await get(a, `/complianceRequests/${request!._id}`);
    expect(kept.status).toBe(200);
    // The same document as GET /customers/data gives (but for when it was made).
    const live = await get(a, '/customers/data?customerIdentifier=7001');
    const { exportedAt: _k, ...keptDocument } = kept.body.complianceRequest.document;
    const { exportedAt: _l, ...liveDocument } = live.body.data;
    expect(keptDocument).toEqual(liveDocument);
    expect(keptDocument.customer).toMatchObject({ shopifyCustomerId: '7001', email: '7001@example.com', points: 120 });
    // The shop's subscribers hear of it (customers/data_requested), in the same transaction.
    const events = await t.app.database.db.selectFrom('outbox_events').select('data').where('shop_id', '=', a.shopId).where('type', '=', 'customers/data_requested').execute();
    expect(events.map((e) => e.data)).toEqual([{ customer: request!.customer, complianceRequest: request!._id, shopifyDataRequestId: '9999' }]);
    // Another shop sees none of it.
    expect((await get(b, `/complianceRequests/${request!._id}`)).status).toBe(404);

    const redact = { shop_id: 954889, shop_domain: a.domain, customer: person, orders_to_redact: [299938] };
    expect((await deliver(a, 'customers/redact', redact, { webhookId: 'redact-7001' })).status).toBe(200);
    // Idempotent on Shopify's webhook id, as every webhook.
    expect(await (await deliver(a, 'customers/redact', redact, { webhookId: 'redact-7001' })).json()).toMatchObject({ status: 'duplicate' });
    await t.app.scheduler.runDue();

    const [erased] = await requests(a);
    expect(erased).toMatchObject({ topic: 'customers/redact', outcome: 'erased', customer: request!.customer });
    for (const former of ['7001', '7001@example.com']) expect((await get(a, `/customers/data?customerIdentifier=${encodeURIComponent(former)}`)).status).toBe(404);
    expect((await get(a, `/complianceRequests/${request!._id}`)).body.complianceRequest.document).toBeNull();
    const tombstone = await t.app.database.db.selectFrom('customers').select(['email', 'points', 'erased_at']).where('id', '=', request!.customer).executeTakeFirstOrThrow();
    expect(tombstone).toMatchObject({ email: `erased-${request!.customer}@erased.invalid`, points: 120, erased_at: expect.any(Date) });
    // No stored webhook body carries them any more, the two compliance webhooks included.
    const bodies = await t.app.database.db.selectFrom('shopify_inbox').select(['topic', 'body']).where('shop_id', '=', a.shopId).execute();
    expect(bodies.filter((r) => r.body.includes('7001'))).toEqual([]);
  });

  it('a customer matched by e-mail when Shopify\'s id is not the shop\'s', async () => {
    await t.customer(a.shopId, 'own-id-1', 5);
    await deliver(a, 'customers/redact', { shop_id: 1, shop_domain: a.domain, customer: { id: 555, email: 'OWN-ID-1@example.com' }, orders_to_redact: [] });
    await t.app.scheduler.runDue();
    expect((await requests(a))[0]).toMatchObject({ outcome: 'erased', customer: expect.any(String) });
    expect((await get(a, '/customers/data?customerIdentifier=own-id-1')).status).toBe(404);
  });

  it('an unknown customer is acknowledged (200), recorded, and nothing changes', async () => {
    const before = await t.app.database.db.selectFrom('customers').select('id').where('shop_id', '=', a.shopId).execute();
    for (const topic of ['customers/redact', 'customers/data_request']) {
      const res = await deliver(a, topic, { shop_id: 1, shop_domain: a.domain, customer: { id: 424242, email: 'nobody@example.com' }, orders_to_redact: [], data_request: { id: 1 } });
      expect(res.status).toBe(200);
    }
    await t.app.scheduler.runDue();
    const [second, first] = await requests(a);
    expect([first!.outcome, second!.outcome]).toEqual(['unknown_customer', 'unknown_customer']);
    expect(first!.customer).toBeNull();
    expect((await get(a, `/complianceRequests/${second!._id}`)).body.complianceRequest.document).toBeNull();
    expect(await t.app.database.db.selectFrom('customers').select('id').where('shop_id', '=', a.shopId).execute()).toEqual(before);
    const res = await t.graphql(a.apiKey, '{ shop { shopifyWebhooks(first: 3) { edges { node { topic status } } } } }');
    expect(res.data.shop.shopifyWebhooks.edges.map((e: any) => e.node.status)).toEqual(['applied', 'applied', 'applied']);
  });

  it('a request that names no customer is recorded as rejected, with its reason', async () => {
    await deliver(a, 'customers/redact', { shop_id: 1, shop_domain: a.domain, customer: {} }, { webhookId: 'nameless' });
    await t.app.scheduler.runDue();
    const res = await t.graphql(a.apiKey, '{ shop { shopifyWebhooks(first: 1) { edges { node { webhookId status error } } } } }');
    expect(res.data.shop.shopifyWebhooks.edges[0].node).toMatchObject({ webhookId: 'nameless', status: 'rejected', error: expect.stringContaining('names its customer') });
  });
});

describe('shopDeletionRequest and shopDeletionCancel', () => {
  it('request a deletion after the grace, then cancel it (the next test moves the clock past it: the shop keeps everything)', async () => {
    const requested = await t.graphql(b.apiKey, 'mutation { shopDeletionRequest { deletion { requestedAt dueAt reason cancelledAt } userErrors { code } } }');
    const { deletion } = requested.data.shopDeletionRequest;
    expect(deletion).toMatchObject({ reason: 'requested', cancelledAt: null });
    expect(Date.parse(deletion.dueAt) - Date.parse(deletion.requestedAt)).toBe(7 * DAY);
    const cancelled = await t.graphql(b.apiKey, 'mutation { shopDeletionCancel { deletion { dueAt cancelledAt } userErrors { code } } }');
    expect(cancelled.data.shopDeletionCancel).toEqual({ deletion: { dueAt: deletion.dueAt, cancelledAt: expect.any(String) }, userErrors: [] });
    const again = await t.graphql(b.apiKey, 'mutation { shopDeletionCancel { deletion { dueAt } userErrors { code } } }');
    expect(again.data.shopDeletionCancel).toEqual({ deletion: null, userErrors: [{ code: 'shop_deletion_not_found' }] });
    const shown = await t.graphql(b.apiKey, '{ shop { deletion { cancelledAt } } }');
    expect(shown.data.shop.deletion.cancelledAt).toEqual(expect.any(String));
    // Audited as the key's.
    const audit = await t.graphql(b.apiKey, '{ auditLog(first: 2) { edges { node { kind actorKind } } } }');
    expect(audit.data.auditLog.edges.map((e: any) => e.node.kind)).toEqual(['shop.deletionCancel', 'shop.deletionRequest']);
  });
});

describe('shop/redact', () => {
  it('schedules the shop\'s deletion; past the grace the scheduler deletes every row of it, and another shop keeps all of its', async () => {
    await fillShop(t, a, 'a');
    await fillShop(t, b, 'b');
    const db = t.app.database.db;
    const bBefore = await shopRowCounts(db, b.shopId);

    expect((await deliver(a, 'shop/redact', { shop_id: 954889, shop_domain: a.domain })).status).toBe(200);
    await t.app.scheduler.runDue();
    expect((await requests(a))[0]).toMatchObject({ topic: 'shop/redact', outcome: 'shop_deletion_scheduled', customer: null });
    const deletion = await db.selectFrom('shop_deletions').selectAll().where('shop_id', '=', a.shopId).executeTakeFirstOrThrow();
    expect(deletion.due_at.getTime() - deletion.requested_at.getTime()).toBe(7 * DAY);
    // During the grace the shop works as before.
    await t.app.scheduler.runDue();
    expect((await get(a, '/customers/data?customerIdentifier=a-1')).status).toBe(200);

    skipped += 7 * DAY + 1000;
    await t.app.scheduler.runDue();
    const aAfter = await shopRowCounts(db, a.shopId);
    expect(Object.entries(aAfter).filter(([, n]) => n > 0)).toEqual([]);
    expect(await shopRowCounts(db, b.shopId)).toEqual(bBefore);
    const done = await db.selectFrom('shop_deletions').selectAll().where('shop_id', '=', a.shopId).executeTakeFirstOrThrow();
    expect(done.completed_at!.getTime()).toBeGreaterThan(deletion.due_at.getTime());
    expect(Number(done.rows_deleted)).toBeGreaterThan(20);
    // Its key is gone with it (after the key cache's 2 s).
    await new Promise((r) => setTimeout(r, 2100));
    expect((await get(a, '/customers/data?customerIdentifier=a-1')).status).toBe(401);
    expect((await get(b, '/customers/data?customerIdentifier=b-1')).status).toBe(200);
  });

  it('the deletion covers every table with a shop_id column', async () => {
    // Not listed: the deletion's own record, and sessions, which go with their membership (ON DELETE CASCADE).
    const covered = new Set([...SHOP_TABLES.map((s) => s.table), 'shop_deletions', 'staff_sessions']);
    expect((await shopIdTables(t.app.database.db)).filter((table) => !covered.has(table))).toEqual([]);
  });
});
