import { createHmac, randomBytes, randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { UnauthenticatedError } from '../src/domain/kernel/errors.js';
import type { SecretBox } from '../src/domain/kernel/sealing.js';
import { receiveShopifyWebhook, setShopifyConnection, SHOPIFY_BODY_MAX_DEPTH } from '../src/domain/shopify/shopify-connector.js';
import { SHOPIFY_WEBHOOKS_PATH } from '../src/rest/shopify-webhooks.js';
import { createSecretBox } from '../src/webhooks/secret-box.js';
import { onPostgres, startTestApp, type TestApp } from './helpers.js';

/**
 * The connector's door (issue 31, items 1 and 8): a body the database cannot store is refused
 * with a 4xx before anything is stored (accepted, it failed on every try), as REST and GraphQL
 * refuse it; a raw NUL byte is a 4xx on every face; an unknown shop domain is answered exactly as
 * a bad signature is.
 */

const SECRET = 'shpss_door_secret_0123456789';
let t: TestApp;
let shop: { shopId: string; apiKey: string };
const domain = `door-${randomUUID().slice(0, 8)}.myshopify.com`;

beforeAll(async () => {
  t = await startTestApp({ WORKER: 'off' });
  shop = await t.shop('Door shop');
  const res = await t.graphql(shop.apiKey, 'mutation($i: ShopifySettingsInput!) { shopifySettingsUpdate(input: $i) { userErrors { code } } }', { i: { shopDomain: domain, webhookSecret: SECRET } });
  expect(res.data.shopifySettingsUpdate.userErrors).toEqual([]);
});
afterAll(() => t?.stop());

/** Delivers raw bytes as Shopify does, signed with the shop's secret (or `hmac`). */
function deliver(body: Buffer, options: { webhookId?: string; shopDomain?: string; hmac?: string; topic?: string } = {}) {
  return fetch(`${t.url}${SHOPIFY_WEBHOOKS_PATH}`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      'x-shopify-topic': options.topic ?? 'customers/create',
      'x-shopify-hmac-sha256': options.hmac ?? createHmac('sha256', SECRET).update(body).digest('base64'),
      'x-shopify-shop-domain': options.shopDomain ?? domain,
      'x-shopify-webhook-id': options.webhookId ?? randomUUID(),
    },
    body: new Uint8Array(body),
  });
}

const stored = async (webhookId: string) =>
  (await t.app.database.db.selectFrom('shopify_inbox').select('id').where('shop_id', '=', shop.shopId).where('webhook_id', '=', webhookId).execute()).length;

const nested = (depth: number) => `{"id":1,"x":${'['.repeat(depth - 1)}${']'.repeat(depth - 1)}}`;

describe(`the Shopify connector's door (${onPostgres ? 'PostgreSQL' : 'PGlite'})`, () => {
  it.each([
    ['a raw NUL byte in a string', Buffer.from('{"id":1,"note":"a\u0000b"}'), 'NUL byte'],
    ['a raw NUL byte after the JSON', Buffer.concat([Buffer.from('{"id":1}'), Buffer.from([0])]), 'NUL byte'],
    ['bytes that are not UTF-8 (an encoded surrogate)', Buffer.concat([Buffer.from('{"id":1,"note":"'), Buffer.from([0xed, 0xa0, 0x80]), Buffer.from('"}')]), 'UTF-8'],
    ['bytes that are not UTF-8 (0xff)', Buffer.from([0x7b, 0xff, 0x7d]), 'UTF-8'],
    ['a \\u0000 escape in a value', Buffer.from('{"id":1,"note":"a\\u0000b"}'), 'body.note: must not contain the NUL character'],
    ['a \\u0000 escape in a key', Buffer.from('{"id":1,"a\\u0000":"b"}'), 'must not contain the NUL character'],
    ['a lone surrogate escape', Buffer.from('{"id":1,"addresses":[{"name":"\\ud800"}]}'), 'body.addresses[0].name: must not contain'],
    [`nesting deeper than ${SHOPIFY_BODY_MAX_DEPTH}`, Buffer.from(nested(SHOPIFY_BODY_MAX_DEPTH + 1)), `deeper than ${SHOPIFY_BODY_MAX_DEPTH}`],
    ['nesting 100,000 deep', Buffer.from(nested(100_000)), `deeper than ${SHOPIFY_BODY_MAX_DEPTH}`],
  ])('refuses %s with a 400 and stores nothing', async (_name, body, message) => {
    const webhookId = randomUUID();
    const res = await deliver(body, { webhookId });
    expect(res.status).toBe(400);
    expect(await res.json()).toMatchObject({ success: false, statusCode: 400, error: 'validation_error', message: expect.stringContaining(message) });
    expect(await stored(webhookId)).toBe(0);
  });

  it(`takes what jsonb can store: ${SHOPIFY_BODY_MAX_DEPTH} levels, a surrogate pair, brackets inside strings; a body that is not JSON is stored as rejected`, async () => {
    for (const body of [nested(SHOPIFY_BODY_MAX_DEPTH), '{"id":1,"note":"\\ud83d\\ude00 [[[{{{ \\" ]]"}', `{"id":1,"note":"${'['.repeat(500)}"}`]) {
      const webhookId = randomUUID();
      const res = await deliver(Buffer.from(body), { webhookId });
      expect(res.status, body.slice(0, 40)).toBe(200);
      expect(await res.json()).toMatchObject({ status: 'accepted' });
      expect(await stored(webhookId)).toBe(1);
    }
    const res = await deliver(Buffer.from('not json'));
    expect(await res.json()).toMatchObject({ status: 'rejected', id: expect.any(String) });
  });

  it('answers an unknown shop domain exactly as a bad signature: the same 401, headers and body', async () => {
    const body = Buffer.from('{"id":1}');
    const forged = await deliver(body, { hmac: createHmac('sha256', 'not-the-secret').update(body).digest('base64') });
    const unknown = await deliver(body, { shopDomain: `nobody-${randomUUID().slice(0, 8)}.myshopify.com` });
    expect([forged.status, unknown.status]).toEqual([401, 401]);
    const headers = (res: Response) => Object.fromEntries([...res.headers].filter(([name]) => !['date', 'x-request-id', 'keep-alive', 'connection'].includes(name)));
    expect(headers(unknown)).toEqual(headers(forged));
    const refusal = await forged.json();
    expect(refusal).toMatchObject({ success: false, statusCode: 401, error: 'shopify_signature_invalid' });
    expect(await unknown.json()).toEqual(refusal);
  });

  it('does the same work for an unknown domain as for a bad signature: one secret opened, one HMAC of the body', async () => {
    const db = t.app.database.db;
    const box = createSecretBox(randomBytes(32));
    const opened: string[] = [];
    const counting: SecretBox = { seal: box.seal, open: (sealed, context) => (opened.push(context), box.open(sealed, context)) };
    const own = await t.shop('Door work shop');
    const ownDomain = `work-${randomUUID().slice(0, 8)}.myshopify.com`;
    await setShopifyConnection(db, box, own.shopId, { shopDomain: ownDomain, webhookSecret: SECRET });
    const attempt = async (shopDomain: string) => {
      opened.length = 0;
      const err = await receiveShopifyWebhook(db, counting, { shopDomain, topic: 'customers/create', webhookId: randomUUID(), hmac: 'AAAA', triggeredAt: null, rawBody: Buffer.from('{"id":1}') }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(UnauthenticatedError);
      return { opened: opened.length, code: (err as UnauthenticatedError).code, message: (err as UnauthenticatedError).message };
    };
    const bad = await attempt(ownDomain);
    expect(bad.opened).toBe(1);
    expect(await attempt('nobody.myshopify.com')).toEqual(bad);
  });
});

describe(`a raw NUL byte is a 4xx on every face (${onPostgres ? 'PostgreSQL' : 'PGlite'})`, () => {
  const withNul = Buffer.from('{"customerIdentifier":"nul-1","amount":1,"note":"a\u0000b"}');

  it('REST, GraphQL (both of its paths) and the storefront answer 400', async () => {
    await t.customer(shop.shopId, 'nul-1', 5);
    const post = (path: string, body: Buffer, headers: Record<string, string>) => fetch(`${t.url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: new Uint8Array(body) });
    const auth = { authorization: `Bearer ${shop.apiKey}` };
    const graphqlBody = Buffer.concat([Buffer.from('{"query":"mutation($i: PointsChangeInput!) { pointsAdd(input: $i) { userErrors { code } } }","variables":{"i":'), withNul, Buffer.from('}}')]);
    const token = (await t.graphql(shop.apiKey, 'mutation { customerAccessTokenCreate(input: { customerIdentifier: "nul-1" }) { accessToken } }')).data.customerAccessTokenCreate.accessToken as string;
    const answers = [
      await post('/rest-api/v1/points/add', withNul, auth),
      await post('/graphql', graphqlBody, auth),
      await post('/graphql', graphqlBody, { ...auth, accept: 'text/event-stream' }),
      await post('/storefront/graphql', Buffer.from('{"query":"{ me { points } }","x":"\u0000"}'), { authorization: `Bearer ${token}` }),
    ];
    expect(answers.map((r) => r.status)).toEqual([400, 400, 400, 400]);
    const balance = await t.app.database.db.selectFrom('customers').select('points').where('shop_id', '=', shop.shopId).where('shopify_customer_id', '=', 'nul-1').executeTakeFirstOrThrow();
    expect(balance.points).toBe(5);
  });
});
