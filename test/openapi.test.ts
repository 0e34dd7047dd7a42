import { createHmac } from 'node:crypto';
import ajvFormats from 'ajv-formats';
import { Ajv2020 } from 'ajv/dist/2020.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inTransaction } from '../src/db/transaction.js';
import { answerShopifyCompliance } from '../src/domain/data-rights/index.js';
import { createPointsRedemption } from '../src/domain/rewards/redemptions.js';
import { registerReferral } from '../src/domain/rewards/referrals.js';
import { REST_PREFIX } from '../src/rest/index.js';
import { SHOPIFY_WEBHOOKS_PATH } from '../src/rest/shopify-webhooks.js';
import { startTestApp, type TestApp } from './helpers.js';
import { type Receiver, startReceiver } from './webhook-receiver.js';

type Doc = {
  openapi: string;
  info: { title: string; version: string };
  paths: Record<string, Record<string, Operation>>;
  webhooks: Record<string, Record<string, Operation>>;
  components: { schemas: Record<string, unknown>; headers: Record<string, { schema: unknown; required?: boolean }>; securitySchemes: Record<string, unknown> };
  security: Array<Record<string, string[]>>;
};
type Operation = {
  operationId: string;
  /** Present (empty) only where no API key is asked for. */
  security?: unknown[];
  parameters?: Array<{ in: string; name: string; required?: boolean } | { $ref: string }>;
  requestBody?: unknown;
  responses: Record<string, { headers?: Record<string, { $ref: string }>; content?: Record<string, { schema: unknown }> }>;
};

const METHODS = ['get', 'put', 'post', 'delete', 'patch', 'head', 'options'];
const pointer = (s: string) => s.replaceAll('~', '~0').replaceAll('/', '~1');
const docPath = (fastifyPath: string) => fastifyPath.replace(/:(\w+)/g, '{$1}');

let t: TestApp;
let doc: Doc;
let ajv: Ajv2020;
let receiver: Receiver;
let shop: { shopId: string; apiKey: string };
/** `METHOD /path status` of every response checked against the document. */
const checked = new Set<string>();

beforeAll(async () => {
  receiver = await startReceiver();
  t = await startTestApp({ WEBHOOK_ALLOWED_HOSTS: 'localhost' });
  const res = await fetch(`${t.url}/openapi.json`);
  expect(res.status).toBe(200);
  expect(res.headers.get('content-type')).toContain('application/json');
  doc = await res.json();
  // OpenAPI 3.1 schemas are JSON Schema 2020-12; `example` is OpenAPI's own annotation.
  ajv = new Ajv2020({ allErrors: true, strict: false });
  ajvFormats.default(ajv);
  ajv.addSchema(doc, 'openapi.json');
  shop = await t.shop('OpenAPI shop');
});

afterAll(async () => {
  await t?.stop();
  await receiver?.close();
});

type Reply = { status: number; body: any; headers: Headers };

async function call(method: string, path: string, options: { body?: unknown; apiKey?: string | null; headers?: Record<string, string>; prefix?: string } = {}): Promise<Reply> {
  const apiKey = options.apiKey === undefined ? shop.apiKey : options.apiKey;
  const res = await fetch(`${t.url}${options.prefix ?? REST_PREFIX}${path}`, {
    method,
    headers: {
      ...(options.body === undefined ? {} : { 'content-type': 'application/json' }),
      ...(apiKey ? { authorization: `Bearer ${apiKey}` } : {}),
      ...options.headers,
    },
    body: options.body === undefined ? undefined : typeof options.body === 'string' ? options.body : JSON.stringify(options.body),
  });
  return { status: res.status, body: await res.json(), headers: res.headers };
}

/**
 * Calls a route and checks the reply against the document: the body against the schema of
 * that path, method and status (refs resolved to components), and the documented headers.
 */
async function expectDocumented(method: string, route: string, path: string, status: number, options: Parameters<typeof call>[2] = {}): Promise<Reply> {
  const reply = await call(method, path, options);
  expect(reply.status, `${method} ${path}: ${JSON.stringify(reply.body)}`).toBe(status);
  const prefix = options.prefix ?? REST_PREFIX;
  const operation = doc.paths[prefix + docPath(route)]?.[method.toLowerCase()];
  expect(operation, `${method} ${route} is documented`).toBeDefined();
  const response = operation!.responses[String(status)];
  expect(response, `${method} ${route} documents ${status}`).toBeDefined();
  const ref = `openapi.json#/paths/${pointer(prefix + docPath(route))}/${method.toLowerCase()}/responses/${status}/content/${pointer('application/json')}/schema`;
  const validate = ajv.getSchema(ref)!;
  expect(validate, ref).toBeDefined();
  const valid = validate(reply.body);
  expect(valid ? [] : validate.errors, `${method} ${path} ${status}: ${JSON.stringify(reply.body).slice(0, 500)}`).toEqual([]);
  for (const [name, header] of Object.entries(response!.headers ?? {})) {
    const component = doc.components.headers[header.$ref.split('/').pop()!]!;
    const value = reply.headers.get(name);
    if (component.required) expect(value, `${method} ${path} ${status} sends ${name}`).not.toBeNull();
    if (value !== null) expect(ajv.validate(component.schema as object, /^\d+$/.test(value) ? Number(value) : value), `${name}: ${value}`).toBe(true);
  }
  checked.add(`${method} ${route} ${status}`);
  return reply;
}

describe('the document', () => {
  it('is an OpenAPI 3.1 object: info, paths, operations with responses, declared parameters and security', () => {
    expect(doc.openapi).toMatch(/^3\.1\.\d+$/);
    expect(typeof doc.info.title).toBe('string');
    expect(typeof doc.info.version).toBe('string');
    expect(Object.keys(doc.paths).length).toBeGreaterThan(0);
    expect(doc.components.securitySchemes.apiKey).toEqual(expect.objectContaining({ type: 'http', scheme: 'bearer' }));
    expect(doc.security).toEqual([{ apiKey: [] }]);
    const operationIds: string[] = [];
    for (const [path, item] of Object.entries(doc.paths)) {
      expect(path.startsWith('/')).toBe(true);
      for (const [method, op] of Object.entries(item)) {
        expect(METHODS).toContain(method);
        operationIds.push(op.operationId);
        expect(Object.keys(op.responses).length, `${method} ${path} has responses`).toBeGreaterThan(0);
        for (const [status, response] of Object.entries(op.responses)) {
          expect(status).toMatch(/^[1-5]\d\d$/);
          expect(typeof (response as { description?: unknown }).description).toBe('string');
        }
        const params = (op.parameters ?? []) as Array<{ in: string; name: string; required?: boolean }>;
        for (const [, name] of path.matchAll(/\{(\w+)\}/g)) {
          expect(params.find((p) => p.in === 'path' && p.name === name), `${method} ${path} declares {${name}}`).toEqual(expect.objectContaining({ required: true }));
        }
        // The Shopify connector's endpoint is called by Shopify, signed, not with an API key: no idempotency key, no limit.
        const byApiKey = op.security === undefined;
        if (method === 'post' && byApiKey) expect(params.some((p) => p.in === 'header' && p.name === 'Idempotency-Key')).toBe(true);
        expect(op.responses['401'] && (op.responses['429'] || !byApiKey)).toBeTruthy();
      }
    }
    expect(new Set(operationIds).size).toBe(operationIds.length);
    // Every schema in it compiles, with every $ref resolved.
    for (const name of Object.keys(doc.components.schemas)) expect(ajv.getSchema(`openapi.json#/components/schemas/${name}`)).toBeDefined();
  });

  it('is served without an API key', async () => {
    const res = await fetch(`${t.url}/openapi.json`);
    expect(res.status).toBe(200);
    expect((await res.json()).paths).toEqual(doc.paths);
  });
});

describe('every route Fastify registers under /rest-api/v1', () => {
  it('is in the document with its method, and the document names no other', async () => {
    const server = t.app.http;
    const registered: string[] = [];
    for (const { path, methods } of parseRoutes(server.printRoutes({ commonPrefix: false }))) {
      if (!path.startsWith(`${REST_PREFIX}/`)) continue;
      for (const method of methods) {
        if (method === 'HEAD') continue; // Fastify's automatic twin of a GET
        // server.ts answers every method a path does not serve with 405: those are not routes.
        const res = await server.inject({ method: method as 'GET', url: path.replace(/:\w+/g, '0'.repeat(24)) });
        if (res.statusCode === 405 && res.json().error === 'method_not_allowed') continue;
        registered.push(`${method} ${docPath(path)}`);
      }
    }
    const documented = Object.entries(doc.paths).flatMap(([path, item]) => Object.keys(item).map((m) => `${m.toUpperCase()} ${path}`));
    expect(registered.sort()).toEqual(documented.filter((d) => d.split(' ')[1]!.startsWith(REST_PREFIX)).sort());
    // Besides them, only the Shopify connector's endpoint.
    expect(documented.filter((d) => !d.split(' ')[1]!.startsWith(REST_PREFIX))).toEqual([`POST ${SHOPIFY_WEBHOOKS_PATH}`]);
  });
});

/** The routes in Fastify's printRoutes tree: each line extends its parent's path. */
function parseRoutes(tree: string): Array<{ path: string; methods: string[] }> {
  const stack: string[] = [];
  const routes: Array<{ path: string; methods: string[] }> = [];
  for (const line of tree.split('\n')) {
    const match = /^((?:│ {3}| {4})*)(?:├── |└── )(.*?)(?: \(([A-Z, ]+)\))?$/.exec(line);
    if (!match) continue;
    const depth = match[1]!.length / 4;
    const path = (stack[depth - 1] ?? '') + match[2]!;
    stack[depth] = path;
    stack.length = depth + 1;
    if (match[3]) routes.push({ path, methods: match[3].split(', ') });
  }
  return routes;
}

describe('live responses match the document', () => {
  const subscription: { id?: string; other?: string } = {};

  it('webhook topics and subscriptions', async () => {
    await expectDocumented('GET', '/webhooks/topics', '/webhooks/topics', 200);
    await expectDocumented('GET', '/webhooks/topics', '/webhooks/topics', 401, { apiKey: null });

    const created = await expectDocumented('POST', '/webhooks/subscriptions', '/webhooks/subscriptions', 201, { body: { topic: 'points/*', callbackUrl: receiver.url } });
    subscription.id = created.body.subscription.id;
    await expectDocumented('POST', '/webhooks/subscriptions', '/webhooks/subscriptions', 409, { body: { topic: 'points/*', callbackUrl: receiver.url } });
    await expectDocumented('POST', '/webhooks/subscriptions', '/webhooks/subscriptions', 400, { body: { topic: 'nope', callbackUrl: receiver.url } });
    await expectDocumented('POST', '/webhooks/subscriptions', '/webhooks/subscriptions', 400, { body: '{"topic":' });
    const singular = await expectDocumented('POST', '/webhooks/subscription', '/webhooks/subscription', 201, { body: { topic: 'redemptions/*', callbackUrl: receiver.url } });
    subscription.other = singular.body.subscription.id;
    await expectDocumented('POST', '/webhooks/subscription', '/webhooks/subscription', 400, { body: { topic: 'points/*', callbackUrl: 'http://example.com/' } });

    await expectDocumented('GET', '/webhooks/subscriptions', '/webhooks/subscriptions', 200);
    await expectDocumented('GET', '/webhooks/subscriptions', '/webhooks/subscriptions', 401, { apiKey: 'lk_wrong_key' });

    const id = subscription.id!;
    await expectDocumented('PUT', '/webhooks/subscriptions/:id', `/webhooks/subscriptions/${id}`, 200, { body: { callbackUrl: `${receiver.url}?v=2` } });
    await expectDocumented('PUT', '/webhooks/subscriptions/:id', '/webhooks/subscriptions/abc', 400, { body: { callbackUrl: receiver.url } });
    await expectDocumented('PUT', '/webhooks/subscriptions/:id', `/webhooks/subscriptions/${'f'.repeat(24)}`, 404, { body: { callbackUrl: receiver.url } });
  });

  it('points: changes, idempotent replays and their errors', async () => {
    await t.customer(shop.shopId, 'c-1', 500);
    const add = await expectDocumented('POST', '/points/add', '/points/add', 200, {
      body: { customerIdentifier: 'c-1@example.com', amount: 50, description: 'order #1' },
      headers: { 'idempotency-key': 'add-1' },
    });
    const replay = await expectDocumented('POST', '/points/add', '/points/add', 200, {
      body: { customerIdentifier: 'c-1@example.com', amount: 50, description: 'order #1' },
      headers: { 'idempotency-key': 'add-1' },
    });
    expect(replay.headers.get('idempotent-replayed')).toBe('true');
    expect(replay.body).toEqual(add.body);
    await expectDocumented('POST', '/points/add', '/points/add', 422, { body: { customerIdentifier: 'c-1', amount: 51 }, headers: { 'idempotency-key': 'add-1' } });
    await expectDocumented('POST', '/points/add', '/points/add', 404, { body: { customerIdentifier: 'nobody', amount: 1 } });
    await expectDocumented('POST', '/points/add', '/points/add', 400, { body: { customerIdentifier: 'c-1', amount: -1 } });
    await expectDocumented('POST', '/points/add', '/points/add', 413, { body: JSON.stringify({ customerIdentifier: 'c-1', amount: 1, note: 'x'.repeat(1024 * 1024) }) });

    for (const path of ['/points/substract', '/points/subtract']) {
      await expectDocumented('POST', path, path, 200, { body: { customerIdentifier: 'c-1', amount: 10, note: 'returned item' } });
      await expectDocumented('POST', path, path, 422, { body: { customerIdentifier: 'c-1', amount: 1_000_000_000 } });
    }
    await expectDocumented('POST', '/points/update', '/points/update', 200, { body: { customerIdentifier: 'c-1', amount: 1000 } });
    await expectDocumented('POST', '/points/update', '/points/update', 404, { body: { customerIdentifier: 'nobody@example.com', amount: 0 } });
    await expectDocumented('POST', '/points/update', '/points/update', 400, { body: 'not json', headers: { 'content-type': 'text/plain' } });
  });

  it('redemptions', async () => {
    const db = t.app.database.db;
    const { pointsRedemption } = await createPointsRedemption(db, shop.shopId, { name: '5 off', type: 'amount', discountPrefix: 'SAVE', rewardValue: 100, discountValue: 5 });
    await createPointsRedemption(db, shop.shopId, { name: 'A gift', type: 'free_product', rewardValue: 300, applyVariants: ['v-1'], expireDateType: 'days', expireDays: 30 });
    await t.customer(shop.shopId, 'c-2', 0);

    const list = await expectDocumented('GET', '/pointsRedemptions', '/pointsRedemptions?customerIdentifier=c-1&page=1&pageSize=10', 200);
    expect(list.body.pointsRedemptions).toHaveLength(2);
    await expectDocumented('GET', '/pointsRedemptions', '/pointsRedemptions?customerIdentifier=c-1&page=1', 400);
    await expectDocumented('GET', '/pointsRedemptions', '/pointsRedemptions?customerIdentifier=nobody&page=1&pageSize=10', 404);

    const redeemed = await expectDocumented('POST', '/pointsRedemptions', '/pointsRedemptions', 200, { body: { customerIdentifier: 'c-1', rewardId: pointsRedemption._id, pointsAmount: 100, currencyActive: 'eur' } });
    const again = await call('POST', '/pointsRedemptions', { body: { customerIdentifier: 'c-1', rewardId: pointsRedemption._id, pointsAmount: 100 } });

    const cancelRoute = '/pointsRedemptions/:code/cancel';
    const cancelPath = (code: string) => `/pointsRedemptions/${encodeURIComponent(code)}/cancel`;
    const cancelled = await expectDocumented('POST', cancelRoute, cancelPath(redeemed.body.discountCode), 200, { body: { returnPoints: true } });
    expect(cancelled.body.discountCode).toMatchObject({ status: 'cancelled', pointsReturned: true });
    expect(cancelled.body.activity).toMatchObject({ type: 'refund_redemption' });
    const bare = await expectDocumented('POST', cancelRoute, cancelPath(again.body.discountCode), 200); // no body: no points back
    expect(bare.body.activity).toBeNull();
    await expectDocumented('POST', cancelRoute, cancelPath(redeemed.body.discountCode), 409, { body: { returnPoints: true } });
    await expectDocumented('POST', cancelRoute, cancelPath('NOSUCHCODE'), 404);
    await expectDocumented('POST', cancelRoute, cancelPath(again.body.discountCode), 400, { body: { returnPoints: 'yes' } });
    await expectDocumented('POST', '/pointsRedemptions', '/pointsRedemptions', 422, { body: { customerIdentifier: 'c-2', rewardId: pointsRedemption._id, pointsAmount: 100 } });
    await expectDocumented('POST', '/pointsRedemptions', '/pointsRedemptions', 404, { body: { customerIdentifier: 'c-1', rewardId: 'a'.repeat(24), pointsAmount: 100 } });
    await expectDocumented('POST', '/pointsRedemptions', '/pointsRedemptions', 400, { body: { customerIdentifier: 'c-1', rewardId: pointsRedemption._id, pointsAmount: 0 } });
  });

  it('a discount code checked against a cart', async () => {
    const db = t.app.database.db;
    const { pointsRedemption } = await createPointsRedemption(db, shop.shopId, { name: '10 % off', type: 'percentage', rewardValue: 100, discountValue: 10 });
    await t.customer(shop.shopId, 'c-check', 100);
    const redeemed = await call('POST', '/pointsRedemptions', { body: { customerIdentifier: 'c-check', rewardId: pointsRedemption._id, pointsAmount: 100 } });
    const code = redeemed.body.discountCode as string;
    const cart = { currency: 'USD', lineItems: [{ productId: 'shirt', quantity: 2, price: '19.99' }], shippingPrice: '5.00' };
    const check = await expectDocumented('POST', '/discountCodes/:code/check', `/discountCodes/${code}/check`, 200, { body: { cart } });
    expect(check.body.check).toEqual({ code, applicable: true, reason: null, currency: 'USD', discount: '4.00', lineItems: [0] });
    const unknown = await expectDocumented('POST', '/discountCodes/:code/check', '/discountCodes/NOPE/check', 200, { body: { cart } });
    expect(unknown.body.check).toMatchObject({ applicable: false, reason: 'code_not_found', discount: '0.00' });
    await expectDocumented('POST', '/discountCodes/:code/check', `/discountCodes/${code}/check`, 400, { body: { cart: { ...cart, shippingPrice: 5 } } });
  });

  it('referrals', async () => {
    const code = await expectDocumented('GET', '/referral', '/referral', 400);
    expect(code.body.details.length).toBeGreaterThan(0);
    const { body } = await expectDocumented('GET', '/referral', '/referral?customerIdentifier=c-1', 200);
    await expectDocumented('GET', '/referral', '/referral?customerIdentifier=nobody', 404);
    await registerReferral(t.app.database.db, shop.shopId, { referralCode: body.data.referralCode, customer: { shopifyCustomerId: 'c-3', email: 'c-3@example.com', birthday: '1990-05-17' } });

    const referees = await expectDocumented('GET', '/referral/referee', '/referral/referee?customerIdentifier=c-1&page=1&pageSize=10', 200);
    expect(referees.body.data).toHaveLength(1);
    await expectDocumented('GET', '/referral/referee', '/referral/referee?customerIdentifier=c-1&page=1&pageSize=251', 400);
    await expectDocumented('GET', '/referral/referee', '/referral/referee?customerIdentifier=nobody&page=1&pageSize=10', 404);
  });

  it('customer access tokens', async () => {
    await t.customer(shop.shopId, 'c-token', 0);
    const created = await expectDocumented('POST', '/customerAccessTokens', '/customerAccessTokens', 201, { body: { customerIdentifier: 'c-token', expiresInSeconds: 600 } });
    expect(created.headers.get('cache-control')).toBe('no-store');
    await expectDocumented('POST', '/customerAccessTokens', '/customerAccessTokens', 400, { body: { customerIdentifier: 'c-token', expiresInSeconds: 86_401 } });
    await expectDocumented('POST', '/customerAccessTokens', '/customerAccessTokens', 404, { body: { customerIdentifier: 'nobody' } });
    const revoked = await expectDocumented('POST', '/customerAccessTokens/revoke', '/customerAccessTokens/revoke', 200, { body: { customerIdentifier: 'c-token' } });
    expect(revoked.body.revokedCount).toBe(1);
    await expectDocumented('POST', '/customerAccessTokens/revoke', '/customerAccessTokens/revoke', 404, { body: { customerIdentifier: 'nobody' } });
  });

  it('deliveries, their replay, and webhook bodies as the document describes them', async () => {
    // points/* (add, two subtracts, update, refunded) and redemptions/* (two created, two cancelled) so far.
    const received = await receiver.waitFor(9, 20_000);
    for (const request of received) {
      const event = JSON.parse(request.body);
      const ref = `openapi.json#/webhooks/${pointer(event.type)}/post/requestBody/content/${pointer('application/json')}/schema`;
      const validate = ajv.getSchema(ref)!;
      expect(validate(event) ? [] : validate.errors, event.type).toEqual([]);
    }

    const list = await expectDocumented('GET', '/webhooks/deliveries', '/webhooks/deliveries?topic=points/*&pageSize=50', 200);
    expect(list.body.deliveries.length).toBeGreaterThanOrEqual(4);
    await expectDocumented('GET', '/webhooks/deliveries', '/webhooks/deliveries?status=nope', 400);

    const id = list.body.deliveries[0].id;
    const one = await expectDocumented('GET', '/webhooks/deliveries/:id', `/webhooks/deliveries/${id}`, 200);
    expect(one.body.delivery.attempts.length).toBeGreaterThan(0);
    await expectDocumented('GET', '/webhooks/deliveries/:id', '/webhooks/deliveries/xyz', 400);
    await expectDocumented('GET', '/webhooks/deliveries/:id', `/webhooks/deliveries/${'b'.repeat(24)}`, 404);

    await expectDocumented('POST', '/webhooks/deliveries/:id/replay', `/webhooks/deliveries/${id}/replay`, 202);
    await expectDocumented('POST', '/webhooks/deliveries/:id/replay', `/webhooks/deliveries/${'b'.repeat(24)}/replay`, 404);
    await expectDocumented('POST', '/webhooks/deliveries/:id/replay', '/webhooks/deliveries/xyz/replay', 400);

    const redemption = list.body.deliveries.length && (await call('GET', '/webhooks/deliveries?topic=redemptions/created')).body.deliveries[0];
    await expectDocumented('POST', '/webhooks/subscriptions/:id/enable', `/webhooks/subscriptions/${subscription.id}/enable`, 200);
    await expectDocumented('POST', '/webhooks/subscriptions/:id/enable', `/webhooks/subscriptions/${'c'.repeat(24)}/enable`, 404);
    await expectDocumented('DELETE', '/webhooks/subscriptions/:id', `/webhooks/subscriptions/${subscription.other}`, 200);
    await expectDocumented('DELETE', '/webhooks/subscriptions/:id', `/webhooks/subscriptions/${subscription.other}`, 404);
    await expectDocumented('DELETE', '/webhooks/subscriptions/:id', '/webhooks/subscriptions/nope', 400);
    await expectDocumented('POST', '/webhooks/deliveries/:id/replay', `/webhooks/deliveries/${redemption.id}/replay`, 422);
  });

  it('secret rotation, up to its rate limit of 5 a minute', async () => {
    const path = `/webhooks/subscriptions/${subscription.id}/rotate-secret`;
    const route = '/webhooks/subscriptions/:id/rotate-secret';
    await expectDocumented('POST', route, path, 201, { body: { graceHours: 0 } });
    await expectDocumented('POST', route, path, 201); // no body: 24 h of grace
    await expectDocumented('POST', route, path, 400, { body: { graceHours: 25 } });
    await expectDocumented('POST', route, `/webhooks/subscriptions/${'c'.repeat(24)}/rotate-secret`, 404);
    await expectDocumented('POST', route, path, 201);
    const limited = await expectDocumented('POST', route, path, 429);
    expect(Number(limited.headers.get('retry-after'))).toBeGreaterThan(0);
  });

  it('orders: recorded, read, replayed and refused', async () => {
    await t.customer(shop.shopId, 'o-1');
    const body = { customerIdentifier: 'o-1', currency: 'USD', subtotal: '20.00', total: '21.50', shipping: '1.50', status: 'paid', lineItems: [{ productId: 'p', quantity: 2, price: '10.00' }] };
    await expectDocumented('PUT', '/orders/:orderId', '/orders/1001', 201, { body, headers: { 'idempotency-key': 'order-1001' } });
    const replay = await expectDocumented('PUT', '/orders/:orderId', '/orders/1001', 201, { body, headers: { 'idempotency-key': 'order-1001' } });
    expect(replay.headers.get('idempotent-replayed')).toBe('true');
    await expectDocumented('PUT', '/orders/:orderId', '/orders/1001', 200, { body: { ...body, status: 'refunded', refunded: '21.50' } });
    await expectDocumented('PUT', '/orders/:orderId', '/orders/1001', 422, { body });
    await expectDocumented('PUT', '/orders/:orderId', '/orders/1002', 400, { body: { ...body, total: 21.5 } });
    await expectDocumented('PUT', '/orders/:orderId', '/orders/1002', 404, { body: { ...body, customerIdentifier: 'nobody' } });
    await expectDocumented('GET', '/orders/:orderId', '/orders/1001', 200);
    await expectDocumented('GET', '/orders/:orderId', '/orders/none', 404);
    const rules = await expectDocumented('GET', '/earningRules', '/earningRules', 200);
    expect(rules.body.data).toEqual([]);
    await expectDocumented('GET', '/earningRules', '/earningRules', 401, { apiKey: null });
    await t.graphql(shop.apiKey, 'mutation { earningRuleCreate(input: { type: custom, name: "Review", earnPoint: 5, action: "review", actionLimit: once }) { userErrors { message } } }');
    const action = { customerIdentifier: 'o-1', action: 'review', reference: 'r-1' };
    await expectDocumented('POST', '/actions', '/actions', 201, { body: action });
    await expectDocumented('POST', '/actions', '/actions', 200, { body: action });
    await expectDocumented('POST', '/actions', '/actions', 422, { body: { ...action, reference: 'r-2' } });
    await expectDocumented('POST', '/actions', '/actions', 404, { body: { ...action, action: 'nope' } });
    const eligibility = await expectDocumented('GET', '/earningRules/eligibility', '/earningRules/eligibility?customerIdentifier=o-1', 200);
    expect(eligibility.body.data).toEqual([expect.objectContaining({ action: 'review', isEarned: true })]);
    await expectDocumented('GET', '/earningRules/eligibility', '/earningRules/eligibility?customerIdentifier=nobody', 404);
  });

  it('a customer\'s VIP tier and progress', async () => {
    const tier = await t.graphql(shop.apiKey, 'mutation { tierCreate(input: { name: "Silver", threshold: "1", multiplier: "1.5" }) { userErrors { code } } }');
    expect(tier.data.tierCreate.userErrors).toEqual([]);
    await t.post('/rest-api/v1/points/add', { customerIdentifier: 'o-1', amount: 5 }, shop.apiKey);
    const found = await expectDocumented('GET', '/vip/tiers/customer', '/vip/tiers/customer?customerIdentifier=o-1', 200);
    expect(found.body.data).toMatchObject({ tier: { name: 'Silver', multiplier: '1.5' }, progress: { next: null, remaining: null } });
    await expectDocumented('GET', '/vip/tiers/customer', '/vip/tiers/customer?customerIdentifier=nobody', 404);
  });

  it('the Shopify connector: accepted, duplicate, a bad signature, an unknown shop, a missing header', async () => {
    const secret = 'openapi-shopify-secret';
    const connected = await t.graphql(shop.apiKey, `mutation { shopifySettingsUpdate(input: { shopDomain: "openapi.myshopify.com", webhookSecret: "${secret}" }) { userErrors { code } } }`);
    expect(connected.data.shopifySettingsUpdate.userErrors).toEqual([]);
    const body = JSON.stringify({ id: 820982911946154500, email: 'o-1@example.com' });
    const headers = (overrides: Record<string, string> = {}) => ({
      'content-type': 'application/json',
      'x-shopify-topic': 'customers/create',
      'x-shopify-shop-domain': 'openapi.myshopify.com',
      'x-shopify-webhook-id': 'openapi-1',
      'x-shopify-hmac-sha256': createHmac('sha256', secret).update(body).digest('base64'),
      ...overrides,
    });
    const shopify = (status: number, h: Record<string, string>) => expectDocumented('POST', SHOPIFY_WEBHOOKS_PATH, SHOPIFY_WEBHOOKS_PATH, status, { prefix: '', apiKey: null, body, headers: h });
    expect((await shopify(200, headers())).body.status).toBe('accepted');
    expect((await shopify(200, headers())).body.status).toBe('duplicate');
    await shopify(401, headers({ 'x-shopify-hmac-sha256': createHmac('sha256', 'wrong').update(body).digest('base64') }));
    await shopify(401, headers({ 'x-shopify-shop-domain': 'unknown.myshopify.com' }));
    await shopify(400, headers({ 'x-shopify-topic': '' }));
  });

  it('exports: a CSV file of the documented media type, and errors in the envelope', async () => {
    for (const [route, query] of [['/exports/customers.csv', ''], ['/exports/ledger.csv', '?from=2026-01-01&to=2027-01-01']] as const) {
      const res = await fetch(`${t.url}${REST_PREFIX}${route}${query}`, { headers: { authorization: `Bearer ${shop.apiKey}` } });
      expect(res.status).toBe(200);
      const documented = Object.keys(doc.paths[REST_PREFIX + route]!.get!.responses['200']!.content!);
      expect(documented).toEqual(['text/csv']);
      expect(res.headers.get('content-type')).toBe('text/csv; charset=utf-8');
      expect((await res.text()).split('\r\n')[0]).toMatch(/^id,/);
      checked.add(`GET ${route} 200`);
      await expectDocumented('GET', route, route, 401, { apiKey: null });
    }
    await expectDocumented('GET', '/exports/ledger.csv', '/exports/ledger.csv?from=2026-01-01', 400);
  });

  it('a customer\'s data out, and their erasure', async () => {
    await t.customer(shop.shopId, 'c-rights', 5);
    const exported = await expectDocumented('GET', '/customers/data', '/customers/data?customerIdentifier=c-rights', 200);
    expect(exported.headers.get('cache-control')).toBe('no-store');
    await expectDocumented('GET', '/customers/data', '/customers/data?customerIdentifier=nobody', 404);
    const erased = await expectDocumented('POST', '/customers/erase', '/customers/erase', 200, { body: { customerIdentifier: 'c-rights' } });
    expect(erased.body.customer.points).toBe(5);
    await expectDocumented('POST', '/customers/erase', '/customers/erase', 404, { body: { customerIdentifier: 'c-rights' } });
  });

  it('Shopify\'s compliance requests as answered', async () => {
    await t.customer(shop.shopId, 'c-compliance', 5);
    // As the connector answers a customers/data_request webhook (the webhook's own path: test/shopify-compliance.test.ts).
    const request = { topic: 'customers/data_request' as const, customer: { id: 'c-compliance', email: null }, orders: ['299938'], dataRequestId: '9999' };
    await inTransaction(t.app.database.db, (trx) => answerShopifyCompliance(trx, shop.shopId, request, new Date(), 7));
    const listed = await expectDocumented('GET', '/complianceRequests', '/complianceRequests?first=10', 200);
    expect(listed.body.complianceRequests[0]).toMatchObject({ outcome: 'exported', shopifyDataRequestId: '9999' });
    await expectDocumented('GET', '/complianceRequests', '/complianceRequests?first=0', 400);
    const one = await expectDocumented('GET', '/complianceRequests/:id', `/complianceRequests/${listed.body.complianceRequests[0]._id}`, 200);
    expect(one.body.complianceRequest.document.customer.shopifyCustomerId).toBe('c-compliance');
    await expectDocumented('GET', '/complianceRequests/:id', '/complianceRequests/nothing', 404);
  });

  it('covered a success and an error of every documented operation', () => {
    for (const [path, item] of Object.entries(doc.paths)) {
      for (const method of Object.keys(item)) {
        const route = (path.startsWith(REST_PREFIX) ? path.slice(REST_PREFIX.length) : path).replace(/\{(\w+)\}/g, ':$1');
        const statuses = [...checked].filter((c) => c.startsWith(`${method.toUpperCase()} ${route} `)).map((c) => Number(c.split(' ')[2]));
        expect(statuses.some((s) => s < 300), `${method} ${path} success`).toBe(true);
        expect(statuses.some((s) => s >= 400), `${method} ${path} error`).toBe(true);
      }
    }
  });
});
