/**
 * Fuzz: bad input is a 4xx JSON error, never a 5xx, and never changes anything.
 *
 * With fast-check and a fixed seed (the same requests every run), at least 10,000 generated bad
 * requests go to one real server, 16 at a time, across every REST route of the contract and
 * GraphQL: wrong types, missing and extra fields, huge strings and numbers, unicode (NUL, lone
 * surrogates), unknown customers with odd identifiers (reaching the database), invalid JSON,
 * wrong content types, bodies over 1 MiB, path injection (../, %00, encoded slashes), header abuse
 * (huge headers, bad Authorization forms, reused and malformed Idempotency-Keys), GraphQL syntax
 * junk, unknown fields, bad variables, deep nesting and batches, and malformed raw HTTP.
 * It proves: no response is a 5xx (nor a GraphQL "Unexpected error", the masked form of one);
 * every non-2xx answer is the JSON error envelope (`{success:false,statusCode,error,message}`, or
 * GraphQL's `{errors:[…]}` on /graphql); the server still answers /healthz; and the database
 * (balances, ledger, codes, referrals, subscriptions, options, events, keys of every shop) is
 * exactly as before. Runs on PGlite and, with TEST_DATABASE_URL, on PostgreSQL.
 */
import { connect } from 'node:net';
import fc from 'fast-check';
import { Pool } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DB } from '../../src/db/database.js';
import { startTestApp, type TestApp } from '../helpers.js';
import { pool, scaled } from './processes.js';

const SEED = 20_261_122;
const COUNT = scaled(10_000, 30_000);
const CONCURRENCY = 16;

type Case = {
  family: string;
  method: string;
  path: string;
  /** Flat [name, value, name, value…], so a header can repeat. */
  headers: string[];
  body?: string | Buffer;
  /** Bytes sent as they are over a plain socket (malformed HTTP undici would refuse to write). */
  raw?: string;
};

let t: TestApp;
let shop: { shopId: string; apiKey: string };
let other: { shopId: string; apiKey: string };
let subscriptionId: string;
let rewardId: string;
/** c-1's customer access token: the storefront cases run as c-1. */
let customerToken: string;

const CUSTOMERS = ['c-0', 'c-1', 'c-2', 'c-3'];
const SHOPIFY_DOMAIN = 'fuzzed.myshopify.com';

beforeAll(async () => {
  // The rate limiter's clock jumps a minute per call: no bucket ever fills, so every request
  // reaches the code behind the limiter (the webhook routes' fixed 30/min would stop most).
  let now = Date.now();
  t = await startTestApp({ WORKER: 'off', WEBHOOK_ALLOWED_HOSTS: 'localhost', RATE_LIMIT_PER_MINUTE: '1000000000' }, { clock: () => (now += 61_000) });
  shop = await t.shop('Fuzzed shop');
  other = await t.shop('Bystander shop');
  for (const [i, id] of CUSTOMERS.entries()) await t.customer(shop.shopId, id, i * 100);
  await t.customer(other.shopId, 'c-1', 500);
  const created = await t.post('/rest-api/v1/webhooks/subscriptions', { topic: 'points/*', callbackUrl: 'https://localhost:9/hook' }, shop.apiKey);
  subscriptionId = (await created.json()).subscription.id;
  const option = await t.graphql(
    shop.apiKey,
    'mutation { pointsRedemptionCreate(input: { name: "5 off", type: amount, discountPrefix: "FZ", rewardValue: 100, discountValue: 5 }) { pointsRedemption { _id } userErrors { code message } } }',
  );
  rewardId = option.data.pointsRedemptionCreate.pointsRedemption._id;
  const minted = await t.graphql(shop.apiKey, 'mutation { customerAccessTokenCreate(input: { customerIdentifier: "c-1", expiresInSeconds: 86400 }) { accessToken } }');
  customerToken = minted.data.customerAccessTokenCreate.accessToken;
  const connected = await t.graphql(shop.apiKey, `mutation { shopifySettingsUpdate(input: { shopDomain: "${SHOPIFY_DOMAIN}", webhookSecret: "fuzz-secret-123" }) { userErrors { code } } }`);
  expect(connected.data.shopifySettingsUpdate.userErrors).toEqual([]);
  // GET /referral creates a code on first call: create them now, so a fuzzed GET changes nothing.
  for (const id of CUSTOMERS) {
    const res = await fetch(`${t.url}/rest-api/v1/referral?customerIdentifier=${id}`, { headers: { authorization: `Bearer ${shop.apiKey}` } });
    expect(res.status).toBe(200);
  }
});
afterAll(() => t?.stop());

/** Everything a request could change, for every shop. */
async function snapshot(db: DB) {
  const count = async (table: 'activities' | 'outbox_events' | 'discount_codes' | 'referral_codes' | 'referrals' | 'webhook_deliveries' | 'customers' | 'orders' | 'pending_points' | 'shopify_inbox') =>
    Number((await db.selectFrom(table).select((eb) => eb.fn.countAll().as('n')).executeTakeFirstOrThrow()).n);
  return {
    customers: await db.selectFrom('customers').select(['id', 'shop_id', 'shopify_customer_id', 'email', 'birthday', 'points', 'updated_at']).orderBy('id').execute(),
    counts: {
      activities: await count('activities'),
      outbox: await count('outbox_events'),
      discountCodes: await count('discount_codes'),
      referralCodes: await count('referral_codes'),
      referrals: await count('referrals'),
      deliveries: await count('webhook_deliveries'),
      customers: await count('customers'),
      orders: await count('orders'),
      pendingPoints: await count('pending_points'),
      shopifyInbox: await count('shopify_inbox'),
    },
    subscriptions: await db.selectFrom('webhook_subscriptions').select(['id', 'topic', 'callback_url', 'previous_secret_valid_until', 'updated_at']).orderBy('id').execute(),
    redemptions: await db.selectFrom('points_redemptions').select(['id', 'status', 'reward_value', 'updated_at']).orderBy('id').execute(),
    shops: await db.selectFrom('shops').selectAll().orderBy('id').execute(),
    apiKeys: await db.selectFrom('api_keys').select(['id', 'revoked_at']).orderBy('id').execute(),
  };
}

// --- Values ---------------------------------------------------------------------------------

const ODD_STRINGS = [
  '\u0000', 'a\u0000b', '\ud800', 'x\udfffy', '😀'.repeat(80), '\u202eevil', 'ﷺ', '../../etc/passwd', '%00', '%2e%2e%2f',
  "' OR 1=1 --", '"; drop table customers; --', '${7*7}', '{{7*7}}', '<script>alert(1)</script>', '%@%', '_@_', '\\', '\r\n',
  'x'.repeat(321), 'x'.repeat(100_000), 'ｃ-１', 'c-1\u0000', 'null', 'undefined', '[object Object]', '__proto__', 'constructor',
];
const oddString = fc.oneof(
  fc.constantFrom(...ODD_STRINGS),
  fc.string({ unit: 'binary', maxLength: 40 }).map((s) => `¿${s}`),
  fc.string({ unit: 'grapheme', minLength: 1, maxLength: 400 }).map((s) => `¿${s}`),
);
const HUGE_NUMBERS = [1e308, -1e308, 2 ** 53 + 2, 2 ** 31, -(2 ** 31) - 1, 1_000_000_001, 1e21, 5e-324, -0.5, 1.5, -1];
/** Never null, never the field's own type: what no schema field of that type accepts. */
const notAString = fc.oneof(fc.integer(), fc.double(), fc.boolean(), fc.constantFrom(...HUGE_NUMBERS), fc.array(fc.string(), { maxLength: 3 }), fc.dictionary(fc.string({ maxLength: 5 }), fc.integer(), { maxKeys: 3 }));
const notAnAmount = fc.oneof(
  fc.constantFrom(...HUGE_NUMBERS),
  fc.string({ maxLength: 12 }),
  fc.constantFrom('1', '10', '1e3', 'NaN', 'Infinity', '-1', '0x10'),
  fc.boolean(),
  fc.constant(null),
  fc.array(fc.integer(), { maxLength: 2 }),
  fc.dictionary(fc.string({ maxLength: 3 }), fc.integer(), { maxKeys: 2 }),
  fc.double({ noInteger: true }),
);
/** Never a list of objects: what no list-of-records field accepts (an empty list would be valid). */
const notAList = fc.oneof(fc.integer(), fc.string({ maxLength: 5 }), fc.boolean(), fc.array(fc.oneof(fc.integer(), fc.string(), fc.constant(null)), { minLength: 1, maxLength: 3 }));
const junkJson = fc.oneof(fc.anything({ maxDepth: 3 }), fc.constantFrom(null, 0, '', [], 'text', true));

// --- REST routes ----------------------------------------------------------------------------

type Field = { name: string; required: boolean; valid: fc.Arbitrary<unknown>; kind: 'string' | 'int' | 'list' };
type Route = { method: string; path: (id: string) => string; fields: Field[]; idRoute?: boolean; mutatesWithValidId?: boolean };

const customerField = (required = true): Field => ({ name: 'customerIdentifier', required, valid: fc.constantFrom(...CUSTOMERS, 'c-1@example.com'), kind: 'string' });
const amount = (min: number): Field => ({ name: 'amount', required: true, valid: fc.integer({ min, max: 50 }), kind: 'int' });
const optionalText = (name: string): Field => ({ name, required: false, valid: fc.string({ maxLength: 20 }), kind: 'string' });

const REST: Route[] = [
  ...['add', 'substract', 'subtract'].map((op) => ({ method: 'POST', path: () => `/points/${op}`, fields: [customerField(), amount(1), optionalText('description'), optionalText('note')] })),
  { method: 'POST', path: () => '/points/update', fields: [customerField(), amount(0), optionalText('description'), optionalText('note')] },
  {
    method: 'POST',
    path: () => '/pointsRedemptions',
    fields: [
      customerField(),
      { name: 'pointsAmount', required: true, valid: fc.constant(100), kind: 'int' },
      { name: 'rewardId', required: true, valid: fc.constant('REWARD'), kind: 'string' },
      { name: 'currencyActive', required: false, valid: fc.constantFrom('USD', 'eur'), kind: 'string' },
    ],
  },
  { method: 'POST', path: () => '/webhooks/subscriptions', fields: [
    { name: 'topic', required: true, valid: fc.constantFrom('points/added', 'points/*', 'customers/created'), kind: 'string' },
    { name: 'callbackUrl', required: true, valid: fc.constantFrom('https://localhost:9/a', 'https://localhost/b'), kind: 'string' },
  ] },
  { method: 'POST', path: () => '/webhooks/subscription', fields: [
    { name: 'topic', required: true, valid: fc.constant('points/added'), kind: 'string' },
    { name: 'callbackUrl', required: true, valid: fc.constant('https://localhost:9/c'), kind: 'string' },
  ] },
  { method: 'PUT', path: (id) => `/webhooks/subscriptions/${id}`, idRoute: true, mutatesWithValidId: true, fields: [
    { name: 'callbackUrl', required: true, valid: fc.constant('https://localhost:9/moved'), kind: 'string' },
  ] },
  { method: 'POST', path: (id) => `/webhooks/subscriptions/${id}/rotate-secret`, idRoute: true, mutatesWithValidId: true, fields: [
    { name: 'graceHours', required: false, valid: fc.integer({ min: 0, max: 24 }), kind: 'int' },
  ] },
  { method: 'DELETE', path: (id) => `/webhooks/subscriptions/${id}`, idRoute: true, fields: [] },
  { method: 'POST', path: (id) => `/webhooks/deliveries/${id}/replay`, idRoute: true, fields: [] },
  // Money is a decimal string: a number (notAString) is a defect, as is any missing required field.
  { method: 'PUT', path: (id) => `/orders/${id}`, idRoute: true, fields: [
    customerField(),
    { name: 'currency', required: true, valid: fc.constantFrom('USD', 'usd'), kind: 'string' },
    { name: 'subtotal', required: true, valid: fc.constant('10.00'), kind: 'string' },
    { name: 'total', required: true, valid: fc.constant('10.00'), kind: 'string' },
    { name: 'refunded', required: false, valid: fc.constantFrom('0', '5.00'), kind: 'string' },
    { name: 'status', required: true, valid: fc.constantFrom('paid', 'partially_refunded'), kind: 'string' },
    { name: 'lineItems', required: true, valid: fc.constant([{ productId: 'p', quantity: 1, price: '10.00' }]), kind: 'list' },
  ] },
];

const GET_ROUTES = ['/pointsRedemptions', '/referral', '/referral/referee', '/webhooks/topics', '/webhooks/subscriptions', '/webhooks/deliveries', '/orders/1001', '/earningRules/eligibility', '/vip/tiers/customer'];
const QUERY_NAMES = ['customerIdentifier', 'page', 'pageSize', 'status', 'topic', 'subscriptionId', 'after', 'first', 'cursor', 'customerIdentifier[]', '__proto__'];

/** Ids that name nothing of this shop: malformed, unknown, another shop's kind, injected. */
const foreignId = fc.oneof(
  fc.constantFrom('0123456789abcdef01234567', 'ffffffffffffffffffffffff', '', 'null', '..', '..%2F..%2Fpoints%2Fadd', '%2e%2e', 'a%00b', '%00', 'x'.repeat(2_000), '%E2%80%AE', '%ff%fe', "1'%20OR%20'1'='1"),
  fc.string({ unit: 'grapheme-ascii', minLength: 1, maxLength: 30 }).map(encodeURIComponent),
  fc.stringMatching(/^[0-9a-f]{24}$/),
);

const auth = () => ['authorization', `Bearer ${shop.apiKey}`];
const json = ['content-type', 'application/json'];

/** A body for `route` with at least one defect, so no generated request can be valid. */
function badBody(route: Route): fc.Arbitrary<{ body: unknown; defect: string }> {
  const valid = fc.record(Object.fromEntries(route.fields.map((f) => [f.name, f.valid])) as Record<string, fc.Arbitrary<unknown>>);
  const required = route.fields.filter((f) => f.required);
  const defects: Array<fc.Arbitrary<{ body: unknown; defect: string }>> = [
    fc.tuple(valid, fc.constantFrom('zz', 'amount ', 'Amount', '__proto__', 'constructor', 'customerIdentifier\u0000'), junkJson).map(([b, key, v]) => {
      const body = { ...(b as object) };
      Object.defineProperty(body, key, { value: v ?? 1, enumerable: true });
      return { body, defect: 'extra field' };
    }),
    // JSON null is "no body" where a body is optional (rotate-secret), so it is not a defect there.
    junkJson
      .filter((v) => typeof v !== 'object' || Array.isArray(v) || (v === null && required.length > 0))
      .map((body) => ({ body, defect: 'not an object' })),
  ];
  if (route.fields.length) {
    defects.push(
      fc.tuple(valid, fc.constantFrom(...route.fields)).chain(([b, field]) =>
        (field.kind === 'int' ? notAnAmount.filter((v) => v !== null || field.required) : field.kind === 'list' ? notAList : notAString).map((v) => ({ body: { ...(b as object), [field.name]: v }, defect: `wrong ${field.name}` })),
      ),
    );
  }
  if (required.length) {
    defects.push(
      fc.tuple(valid, fc.constantFrom(...required)).map(([b, field]) => {
        const body = { ...(b as Record<string, unknown>) };
        delete body[field.name];
        return { body, defect: `missing ${field.name}` };
      }),
    );
  }
  if (route.fields.some((f) => f.name === 'customerIdentifier')) {
    // Valid in every other way: the odd identifier travels to the database and finds nobody.
    defects.push(fc.tuple(valid, oddString).map(([b, id]) => ({ body: { ...(b as object), customerIdentifier: id }, defect: 'unknown customer' })));
  }
  if (route.fields.length === 0) defects.push(fc.constant({ body: {}, defect: 'unknown id' }));
  return fc.oneof(...defects);
}

const restBody: fc.Arbitrary<Case> = fc
  .constantFrom(...REST)
  .chain((route) => fc.tuple(fc.constant(route), badBody(route), foreignId, fc.boolean(), fc.option(fc.constantFrom('fz-1', 'fz-2', 'fz-3'), { nil: undefined })))
  .map(([route, { body, defect }, id, realId, idempotencyKey]) => {
    // A real subscription id only where the body's defect stops the change; DELETE and replay never get one.
    const useReal = route.mutatesWithValidId && realId && defect !== 'unknown id';
    const text = JSON.stringify(body, (_k, v) => (v === 'REWARD' ? rewardId : v));
    return {
      family: `rest body: ${defect}`,
      method: route.method,
      path: `/rest-api/v1${route.path(useReal ? subscriptionId : id)}`,
      headers: [...auth(), ...json, ...(idempotencyKey ? ['idempotency-key', idempotencyKey] : [])],
      body: text ?? 'null',
    };
  });

const restQuery: fc.Arbitrary<Case> = fc
  .tuple(
    fc.constantFrom(...GET_ROUTES),
    fc.array(fc.tuple(fc.constantFrom(...QUERY_NAMES), fc.oneof(oddString, fc.constantFrom('0', '-1', '1e9', '251', '1.5', 'NaN', '', '99999999999999999999', 'c-1'), fc.integer().map(String))), { maxLength: 5 }),
  )
  .map(([route, params]) => ({
    family: 'rest query',
    method: 'GET',
    path: `/rest-api/v1${route}?${params.map(([k, v]) => `${encodeURIComponent(k)}=${encodeURIComponent(v.replace(/[\ud800-\udfff]/g, '?'))}`).join('&')}`,
    headers: auth(),
  }));

const ALL_PATHS = [...REST.map((r) => `/rest-api/v1${r.path('0123456789abcdef01234567')}`), ...GET_ROUTES.map((p) => `/rest-api/v1${p}`), '/graphql'];

const rawBody: fc.Arbitrary<Case> = fc
  .tuple(
    fc.constantFrom(...ALL_PATHS),
    fc.constantFrom('POST', 'PUT'),
    fc.oneof(
      { weight: 6, arbitrary: fc.constantFrom('{', '{"customerIdentifier":', '{"a":1,}', "{'a':1}", 'NaN', '[1,2', '\u0000', '{"amount":1e999999}', '"\\ud800"', '{"a":"\\u0000"}', '', ' ', '{}{}', 'true false').map((b) => ({ ct: 'application/json', body: b as string | Buffer, what: 'invalid JSON' })) },
      { weight: 6, arbitrary: fc.tuple(fc.constantFrom('text/plain', 'application/x-www-form-urlencoded', 'multipart/form-data; boundary=x', 'application/xml', 'application/graphql', 'application/json; charset=utf-16', 'application/jsonx', 'application/*', '*/*', '', 'json', 'application/json, text/plain', 'application/octet-stream'), fc.constantFrom('{"customerIdentifier":"c-1","amount":1,"zz":1}', 'amount=1', '<a/>', '{ webhookTopics { topic } }')).map(([ct, body]) => ({ ct, body: body as string | Buffer, what: `content type ${ct}` })) },
      { weight: 4, arbitrary: fc.constantFrom(Buffer.from([0xff, 0xfe, 0x00, 0x7b]), Buffer.from('{"customerIdentifier":"\xff\xfe","amount":1}', 'latin1'), Buffer.from([0xc3, 0x28])).map((body) => ({ ct: 'application/json', body: body as string | Buffer, what: 'invalid UTF-8' })) },
      { weight: 1, arbitrary: fc.constantFrom(1_048_577, 1_500_000).map((n) => ({ ct: 'application/json', body: `{"customerIdentifier":"${'x'.repeat(n)}","amount":1}` as string | Buffer, what: 'over 1 MiB' })) },
    ),
  )
  .map(([path, method, { ct, body, what }]) => ({
    family: `raw body: ${what}`,
    method: path === '/graphql' ? 'POST' : method,
    path,
    headers: [...auth(), ...(ct ? ['content-type', ct] : [])],
    body,
  }));

const INJECTED_PATHS = [
  '/rest-api/v1/../graphql', '/rest-api/v1/%2e%2e/healthz', '/rest-api/v1/points/add%00', '/rest-api/v1/points%2fadd', '/rest-api/v1/points/add/..%2f..%2fhealthz',
  '//rest-api//v1//points//add', '/rest-api/v1/points/./add', '/rest-api/v1/points/add;jsessionid=1', '/rest-api/v1/points/add%20', '/rest-api/v1/POINTS/ADD',
  '/rest-api/v2/points/add', '/rest-api/v1/webhooks/subscriptions/%2e%2e%2f%2e%2e%2fpoints%2fadd/rotate-secret', '/rest-api/v1/webhooks/deliveries/..%5c..%5c',
  '/rest-api/v1/webhooks/subscriptions/%00/rotate-secret', '/rest-api/v1/%ff', '/rest-api/v1/%', '/rest-api/v1/%zz', `/rest-api/v1/${'a/'.repeat(2_000)}`,
  '/graphql/../rest-api/v1/points/add', '/graphql%00', '/dashboard/../../etc/passwd', '/dashboard/%2e%2e/%2e%2e/etc/passwd', '/healthz/../readyz',
  '/rest-api/v1/referral?customerIdentifier=c-1&customerIdentifier=c-2', '/rest-api/v1/pointsRedemptions?page[]=1&pageSize[x]=2',
  '/rest-api/v1/pointsRedemptions?customerIdentifier=%00&page=1&pageSize=50', '/rest-api/v1/webhooks/deliveries?status=%ff&topic=%E2%80%AE',
];
const pathInjection: fc.Arbitrary<Case> = fc
  .tuple(
    fc.oneof(fc.constantFrom(...INJECTED_PATHS), fc.string({ unit: 'grapheme-ascii', maxLength: 40 }).map((s) => `/rest-api/v1/${encodeURI(s).replace(/[?#]/g, '')}`)),
    fc.constantFrom('GET', 'POST', 'PUT', 'DELETE', 'PATCH', 'OPTIONS', 'HEAD'),
  )
  .map(([path, method]) => ({
    family: 'path injection',
    method,
    path,
    headers: [...auth(), ...(['GET', 'HEAD'].includes(method) ? [] : json)],
    body: ['GET', 'HEAD'].includes(method) ? undefined : '{"zz":1}',
  }));

const headerAbuse: fc.Arbitrary<Case> = fc
  .tuple(
    fc.constantFrom(...ALL_PATHS.filter((p) => !p.includes('0123'))),
    fc.constantFrom<(key: string) => string[]>(
      () => [],
      () => ['authorization', 'Bearer'],
      () => ['authorization', 'Bearer '],
      () => ['authorization', 'Basic dXNlcjpwYXNz'],
      () => ['authorization', 'Bearer lk_'],
      () => ['authorization', 'Bearer lk__'],
      (key) => ['authorization', `Bearer ${key}x`],
      (key) => ['authorization', `Bearer ${key.slice(0, -1)}`],
      (key) => ['authorization', `Bearer ${key.slice(0, 14)}${'A'.repeat(40)}`],
      (key) => ['authorization', `Bearer ${key} ${key}`],
      (key) => ['authorization', `Token ${key}`],
      (key) => ['authorization', key],
      (key) => ['authorization', `Bearer ${key}`, 'authorization', 'Bearer lk_other'],
      () => ['authorization', `Bearer ${'a'.repeat(8_000)}`],
      () => ['authorization', `Bearer lk_${'é'.repeat(10)}_${'ü'.repeat(40)}`],
      (key) => ['authorization', `Bearer ${key}`, 'x-junk', 'a'.repeat(20_000)],
      (key) => ['authorization', `Bearer ${key}`, ...Array.from({ length: 300 }, (_, i) => [`x-h${i}`, 'v']).flat()],
      (key) => ['authorization', `Bearer ${key}`, 'idempotency-key', ''],
      (key) => ['authorization', `Bearer ${key}`, 'idempotency-key', 'k'.repeat(256)],
      (key) => ['authorization', `Bearer ${key}`, 'idempotency-key', 'clé-é'],
      (key) => ['authorization', `Bearer ${key}`, 'idempotency-key', 'fz-dup', 'idempotency-key', 'fz-dup2'],
      (key) => ['authorization', `Bearer ${key}`, 'idempotency-key', 'fz-1'],
      (key) => ['authorization', `Bearer ${key}`, 'x-request-id', 'r'.repeat(5_000)],
      (key) => ['authorization', `Bearer ${key}`, 'content-length', '5'],
      (key) => ['authorization', `Bearer ${key}`, 'accept', 'text/event-stream'],
      (key) => ['authorization', `Bearer ${key}`, 'accept', 'application/xml'],
    ),
    fc.constantFrom('GET', 'POST', 'PUT', 'DELETE'),
  )
  .map(([path, headersOf, method]) => {
    const body = method === 'GET' ? undefined : '{"customerIdentifier":"c-1","amount":1,"zz":true}';
    const headers = headersOf(shop.apiKey);
    // undici sets content-length itself; a conflicting one is sent raw instead.
    const raw = headers.includes('content-length')
      ? `${method} ${path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${shop.apiKey}\r\nContent-Type: application/json\r\nContent-Length: 5\r\nConnection: close\r\n\r\n${body ?? ''}`
      : undefined;
    return { family: 'header abuse', method, path, headers: [...headers, ...(body ? json : [])], body, raw };
  });

/** Malformed HTTP that only a raw socket can send: Node's parser refuses it before any route. */
const rawHttp: fc.Arbitrary<Case> = fc
  .constantFrom(
    'POST /rest-api/v1/points/add HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nContent-Type: application/json\r\n\r\nzz\r\n{}\r\n0\r\n\r\n',
    'POST /rest-api/v1/points/add HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nContent-Length: 3\r\nContent-Type: application/json\r\n\r\n{}',
    'GET /rest-api/v1/webhooks/topics HTTP/1.1\r\nHost: x\r\nBad Header\r\n\r\n',
    'GET /rest-api/v1/webhooks/topics HTTP/9.9\r\nHost: x\r\n\r\n',
    'GARBAGE\r\n\r\n',
    'GET /rest-api/v1/webhooks/topics HTTP/1.1\r\nHost: x\r\nX: a\u0000b\r\n\r\n',
    'POST /rest-api/v1/points/add HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n',
    'POST /rest-api/v1/points/add HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n',
  )
  .map((raw) => ({ family: 'malformed HTTP', method: raw.split(' ')[0]!, path: raw.split(' ')[1] ?? '/', headers: [], raw: raw.includes('Connection:') ? raw : raw.replace('\r\n\r\n', '\r\nConnection: close\r\n\r\n') }));

// --- GraphQL --------------------------------------------------------------------------------

const GQL_DOCUMENTS = [
  '{', '}', 'query', 'mutation { }', '{ webhookTopics { nope } }', '{ nope }', '{ customer { points } }', '{ customer(identifier: 5) { points } }',
  '{ customer(identifier: "c-1") { points(first: 1) } }', '{ customers(first: -1) { edges { node { email } } } }', '{ customers(first: 100000) { edges { node { email } } } }',
  '{ customers(after: "!!!notacursor") { edges { node { email } } } }', '{ customers(after: "eyJhIjoxfQ==") { edges { node { email } } } }',
  '{ pointsRedemptions(first: 2147483648) { edges { node { _id } } } }', '{ webhookDeliveries(status: nope) { edges { node { id } } } }',
  '{ webhookDeliveries(topic: "%") { edges { node { id } } } }', '{ webhookDelivery(id: "../../x") { id } }', '{ webhookDelivery(id: "\\u0000") { id } }',
  'query A { webhookTopics { topic } } query B { webhookTopics { topic } }', 'fragment F on Query { ...F } { ...F }', '{ __schema { types { name } } }',
  'subscription { events(topics: ["nope/*"]) { id } }', 'subscription { events(topics: []) { id } }',
  `{ ${Array.from({ length: 600 }, (_, i) => `a${i}: webhookTopics { topic }`).join(' ')} }`,
  `{ customer(identifier: "c-1") ${'{ activities(first: 1) { edges { node { _id '.repeat(1)}${'} } } '.repeat(1)}${'{'.repeat(0)}}`,
  `query { ${'customer(identifier: "c-1") { referees { edges { node { customer '.repeat(30)}`,
  `{ customer(identifier: "${'x'.repeat(50_000)}") { points } }`,
  'mutation { pointsAdd(input: { customerIdentifier: "c-1", amount: 1, zz: 1 }) { activity { _id } } }',
  'mutation { pointsAdd(input: { customerIdentifier: "c-1", amount: "1" }) { activity { _id } } }',
  'mutation { pointsAdd(input: { customerIdentifier: "c-1", amount: 2147483648 }) { activity { _id } } }',
  'mutation { pointsAdd(input: { customerIdentifier: "c-1", amount: -5 }) { activity { _id } userErrors { code } } }',
  'mutation { pointsSet(input: { customerIdentifier: "c-1", amount: 1.5 }) { activity { _id } } }',
  'mutation { pointsSubtract(input: { customerIdentifier: "c-1" }) { activity { _id } } }',
  'mutation { pointsRedeem(input: { customerIdentifier: "c-1", pointsAmount: 100, rewardId: "nope" }) { discountCode { code } userErrors { code } } }',
  'mutation { customerUpsert(input: { shopifyCustomerId: "c-1", email: "not-an-email" }) { customer { _id } userErrors { code } } }',
  'mutation { customerUpsert(input: { shopifyCustomerId: "", email: "x@example.com" }) { customer { _id } userErrors { code } } }',
  'mutation { shopReferralSettingsUpdate(input: { referrerPoints: -1 }) { userErrors { code } } }',
  'mutation { shopReferralSettingsUpdate(input: { referrerPoints: 1, zz: 2 }) { userErrors { code } } }',
  'mutation { referralRegister(input: { referralCode: "\\u0000", customer: { shopifyCustomerId: "n-1", email: "n-1@example.com" } }) { userErrors { code } } }',
  'mutation { webhookSubscriptionCreate(input: { topic: "points/added", callbackUrl: "http://169.254.169.254/" }) { userErrors { code } } }',
  'mutation { webhookSubscriptionCreate(input: { topic: "nope", callbackUrl: "https://localhost:9/x" }) { userErrors { code } } }',
  'mutation { webhookSubscriptionDelete(input: { id: "0123456789abcdef01234567" }) { userErrors { code } } }',
  'mutation { webhookSubscriptionRotateSecret(input: { id: "SUB", graceHours: 25 }) { userErrors { code } } }',
  'mutation { webhookSubscriptionUpdate(input: { id: "SUB", callbackUrl: "ftp://x" }) { userErrors { code } } }',
  'mutation { pointsRedemptionUpdate(input: { id: "REWARD", rewardValue: -1 }) { userErrors { code } } }',
  'mutation { pointsRedemptionUpdate(input: { id: "REWARD", discountValue: 1e400 }) { userErrors { code } } }',
  'mutation { pointsRedemptionCreate(input: { name: "", type: amount, rewardValue: 0 }) { userErrors { code } } }',
  'mutation { pointsRedemptionDelete(input: { id: "0123456789abcdef01234567" }) { userErrors { code } } }',
  'mutation { webhookDeliveryReplay(input: { id: "%00" }) { userErrors { code } } }',
];
const CHANGE = 'mutation($input: PointsChangeInput!) { pointsAdd(input: $input) { activity { _id } userErrors { code } } }';
const REDEEM = 'mutation($input: PointsRedeemInput!) { pointsRedeem(input: $input) { discountCode { code } userErrors { code } } }';

const graphqlCase: fc.Arbitrary<Case> = fc.oneof(
  // Documents that are junk, reach unknown fields, or carry a defect in their literal arguments.
  fc.tuple(fc.oneof(fc.constantFrom(...GQL_DOCUMENTS), fc.string({ unit: 'grapheme', maxLength: 60 })), fc.option(junkJson, { nil: undefined }), fc.option(fc.oneof(fc.string({ maxLength: 5 }), fc.integer()), { nil: undefined })).map(([query, variables, operationName]) => ({
    family: 'graphql document',
    method: 'POST',
    path: '/graphql',
    headers: [...auth(), ...json],
    body: JSON.stringify({ query: query.replace('"SUB"', `"${subscriptionId}"`).replace('"REWARD"', `"${rewardId}"`), variables, operationName }),
  })),
  // The real mutations, with variables that have a defect (as the REST bodies).
  fc.oneof(badBody(REST[0]!).map((b) => [CHANGE, b] as const), badBody(REST[4]!).map((b) => [REDEEM, b] as const)).map(([query, { body, defect }]) => ({
    family: `graphql variables: ${defect}`,
    method: 'POST',
    path: '/graphql',
    headers: [...auth(), ...json],
    body: JSON.stringify({ query, variables: { input: body } }, (_k, v) => (v === 'REWARD' ? rewardId : v)),
  })),
  // Request shapes: not an object, wrong member types, batches, GET with a mutation.
  fc.constantFrom(
    { method: 'POST', path: '/graphql', body: '[]' },
    { method: 'POST', path: '/graphql', body: `[${'{"query":"{ webhookTopics { topic } }"},'.repeat(50)}{}]` },
    { method: 'POST', path: '/graphql', body: '{"query":123}' },
    { method: 'POST', path: '/graphql', body: '{"query":null}' },
    { method: 'POST', path: '/graphql', body: '{"query":["{ webhookTopics { topic } }"]}' },
    { method: 'POST', path: '/graphql', body: '{"query":"{ webhookTopics { topic } }","variables":"x"}' },
    { method: 'POST', path: '/graphql', body: '{"query":"{ webhookTopics { topic } }","variables":[1]}' },
    { method: 'POST', path: '/graphql', body: '{"query":"{ webhookTopics { topic } }","extensions":"x"}' },
    { method: 'POST', path: '/graphql', body: '{"query":"{ webhookTopics { topic } }","extensions":{"persistedQuery":{"version":1,"sha256Hash":"x"}}}' },
    { method: 'POST', path: '/graphql', body: '{"query":"{ webhookTopics { topic } }","__proto__":{"x":1}}' },
    { method: 'POST', path: '/graphql', body: '{}' },
    { method: 'GET', path: `/graphql?query=${encodeURIComponent('mutation { pointsAdd(input: { customerIdentifier: "c-1", amount: 1 }) { activity { _id } } }')}` },
    { method: 'GET', path: '/graphql?query=%7B&variables=%7B' },
    { method: 'GET', path: `/graphql?query=${encodeURIComponent('{ webhookTopics { topic } }')}&variables=notjson` },
    { method: 'GET', path: '/graphql?query[]=1' },
    { method: 'PUT', path: '/graphql', body: '{"query":"{ webhookTopics { topic } }"}' },
    { method: 'DELETE', path: '/graphql' },
  ).map((c) => ({ family: 'graphql request shape', ...c, headers: [...auth(), 'accept', 'application/json', ...(c.body ? json : [])] })),
);

/** A valid mutation asking for a format GraphQL cannot answer in: it must be refused before it runs. */
const graphqlNotAcceptable: fc.Arbitrary<Case> = fc
  .constantFrom('application/xml', 'text/html', 'image/png', 'application/json; charset=utf-16', 'text/plain, application/xml;q=0.9')
  .map((accept) => ({
    family: 'graphql not acceptable',
    method: 'POST',
    path: '/graphql',
    headers: [...auth(), ...json, 'accept', accept],
    body: JSON.stringify({ query: 'mutation { pointsAdd(input: { customerIdentifier: "c-1", amount: 7 }) { activity { _id } } }' }),
  }));

/**
 * Shopify webhooks that do not prove they come from the shop's store: no signature, a wrong one,
 * an unknown or odd domain, missing or huge headers, with any body. Nothing may be stored.
 */
const shopifyWebhook: fc.Arbitrary<Case> = fc
  .tuple(
    fc.oneof(fc.constant(SHOPIFY_DOMAIN), fc.constantFrom('nobody.myshopify.com', '', 'FUZZED.MYSHOPIFY.COM ', '../x', 'x'.repeat(300)), oddString),
    fc.oneof(fc.constantFrom('', 'AAAA', 'not base64!', '=', 'x'.repeat(300)), fc.base64String({ minLength: 4, maxLength: 64 })),
    fc.oneof(fc.constantFrom('orders/paid', 'refunds/create', 'customers/create', 'products/create', ''), oddString),
    fc.option(fc.oneof(fc.constantFrom('', 'w-1'), oddString), { nil: undefined }),
    fc.oneof(junkJson.map((v) => JSON.stringify(v) ?? 'null'), fc.constantFrom('{"id":1,"line_items":[]}', '{', '')),
  )
  .map(([domain, hmac, topic, webhookId, body]) => {
    const header = (name: string, value: string) => (value === '' ? [] : [name, value.replace(/[\u0000-\u001f\u007f-\uffff]/g, '?')]);
    return {
      family: 'shopify webhook',
      method: 'POST',
      path: '/integrations/shopify/webhooks',
      headers: [...json, ...header('x-shopify-shop-domain', domain), ...header('x-shopify-hmac-sha256', hmac), ...header('x-shopify-topic', topic), ...(webhookId === undefined ? [] : header('x-shopify-webhook-id', webhookId))],
      body,
    };
  });

/** Documents the storefront must refuse or answer without a change: other customers, admin fields, bad arguments. */
const STOREFRONT_DOCUMENTS = [
  '{ me { points referees { totalCount } } }',
  '{ me(identifier: "c-2") { points } }',
  '{ customer(identifier: "c-2") { points } }',
  '{ rewards(first: -1) { edges { node { _id } } } }',
  '{ rewards(first: 100000) { edges { node { _id } } } }',
  '{ rewards(after: "%00") { edges { node { _id } } } }',
  '{ me { activities(first: 5, after: "not-a-cursor") { edges { node { _id } } } } }',
  'mutation { redeem(input: { rewardId: "REWARD", pointsAmount: -5 }) { userErrors { code } } }',
  'mutation { redeem(input: { rewardId: "0123456789abcdef01234567", pointsAmount: 100 }) { userErrors { code } } }',
  'mutation { redeem(input: { rewardId: "REWARD", pointsAmount: 100000000000 }) { userErrors { code } } }',
  'mutation { redeem(input: { rewardId: "REWARD", pointsAmount: 100, customerIdentifier: "c-2" }) { userErrors { code } } }',
  'mutation { pointsAdd(input: { customerIdentifier: "c-1", amount: 1 }) { activity { _id } } }',
  'subscription { events(topics: ["points/*"]) { id } }',
];
const STOREFRONT = '/storefront/graphql';

/** The storefront face: junk documents with c-1's token, and good documents with bad credentials or origins. */
const storefrontCase: fc.Arbitrary<Case> = fc.oneof(
  fc.tuple(fc.oneof(fc.constantFrom(...STOREFRONT_DOCUMENTS), fc.string({ unit: 'grapheme', maxLength: 60 })), fc.option(junkJson, { nil: undefined })).map(([query, variables]) => ({
    family: 'storefront document',
    method: 'POST',
    path: STOREFRONT,
    headers: ['authorization', `Bearer ${customerToken}`, ...json],
    body: JSON.stringify({ query: query.replace('"REWARD"', `"${rewardId}"`), variables }),
  })),
  fc.tuple(
    fc.constantFrom<() => string>(
      () => '',
      () => 'Bearer',
      () => 'Bearer ct_',
      () => 'Basic abc',
      () => `Bearer ${shop.apiKey}`,
      () => `Bearer ${customerToken}x`,
      () => `Bearer ${customerToken.slice(0, -1)}${customerToken.endsWith('A') ? 'B' : 'A'}`,
      () => `Bearer ${customerToken.replace(/^ct_[a-z0-9]{10}/, 'ct_aaaaaaaaaa')}`,
      () => `Token ${customerToken}`,
      () => customerToken,
      () => `Bearer ${'ct_'.padEnd(8_000, 'x')}`,
    ),
    fc.constantFrom('{ me { points } }', 'mutation { referralCode { referralCode } }'),
  ).map(([authorization, query]) => ({
    family: 'storefront credential',
    method: 'POST',
    path: STOREFRONT,
    headers: [...(authorization() ? ['authorization', authorization()] : []), ...json],
    body: JSON.stringify({ query }),
  })),
  fc.tuple(fc.oneof(fc.constantFrom('null', 'https://evil.example', 'http://127.0.0.1', '*', '', 'https://evil.example/x', 'http://[::1]:80', 'x'.repeat(300)), fc.webUrl()), fc.constantFrom('POST', 'OPTIONS')).map(([origin, method]) => ({
    family: 'storefront origin',
    method,
    path: STOREFRONT,
    headers: ['origin', origin, 'access-control-request-method', 'POST', 'authorization', `Bearer ${customerToken}`, ...(method === 'POST' ? json : [])],
    ...(method === 'POST' ? { body: JSON.stringify({ query: '{ me { points } }' }) } : {}),
  })),
);

const anyCase: fc.Arbitrary<Case> = fc.oneof(
  { weight: 6, arbitrary: storefrontCase },
  { weight: 30, arbitrary: restBody },
  { weight: 10, arbitrary: restQuery },
  { weight: 10, arbitrary: rawBody },
  { weight: 10, arbitrary: pathInjection },
  { weight: 12, arbitrary: headerAbuse },
  { weight: 2, arbitrary: rawHttp },
  { weight: 25, arbitrary: graphqlCase },
  { weight: 1, arbitrary: graphqlNotAcceptable },
  { weight: 6, arbitrary: shopifyWebhook },
);

// --- Sending and judging --------------------------------------------------------------------

type Answer = { status: number; headers: Record<string, string | string[] | undefined>; body: string };

/** Writes raw bytes and reads until the server closes (every raw case asks it to). */
function sendRaw(port: number, raw: string): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    const chunks: Buffer[] = [];
    socket.setTimeout(10_000, () => socket.destroy(new Error('raw request: no answer in 10 s')));
    socket.on('data', (c) => chunks.push(c));
    socket.on('error', reject);
    socket.on('close', () => {
      const text = Buffer.concat(chunks).toString('utf8');
      const [head = '', ...rest] = text.split('\r\n\r\n');
      const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(head)?.[1] ?? 0);
      const headers = Object.fromEntries(head.split('\r\n').slice(1).map((l) => [l.slice(0, l.indexOf(':')).toLowerCase(), l.slice(l.indexOf(':') + 1).trim()]));
      let body = rest.join('\r\n\r\n');
      // A chunked answer: join the chunks' data.
      if (String(headers['transfer-encoding']).includes('chunked')) {
        let out = '';
        for (let at = 0; ; ) {
          const eol = body.indexOf('\r\n', at);
          const size = parseInt(body.slice(at, eol), 16);
          if (!size) break;
          out += body.slice(eol + 2, eol + 2 + size);
          at = eol + 2 + size + 2;
        }
        body = out;
      }
      resolve({ status, headers, body });
    });
    socket.end(raw);
  });
}

/** Why this answer breaks a rule, or null when it is fine. */
function judge(c: Case, a: Answer): string | null {
  if (a.status === 0) return 'no HTTP answer';
  if (a.status >= 500) return `status ${a.status}`;
  if (c.method === 'HEAD' || a.status === 204) return null;
  const graphql = (c.path.startsWith('/graphql') && !c.path.startsWith('/graphql/')) || c.path === STOREFRONT;
  // A client that asked for GraphQL over SSE gets its errors as an SSE `next` event.
  const sseData = graphql && String(a.headers['content-type']).includes('text/event-stream') ? /^data: (.*)$/m.exec(a.body)?.[1] : undefined;
  let body: any;
  try {
    body = JSON.parse(sseData ?? a.body);
  } catch {
    // A 2xx that is not JSON is a page or a stream (GET /graphql with Accept: text/event-stream).
    return a.status < 300 && !String(a.headers['content-type']).includes('json') ? null : `not JSON (${a.status}): ${a.body.slice(0, 120)}`;
  }
  const errors: unknown = body?.errors;
  if (graphql && Array.isArray(errors) && errors.some((e) => /unexpected error/i.test(String(e?.message)))) return `masked internal error: ${JSON.stringify(errors).slice(0, 200)}`;
  if (a.status < 300) return c.method === 'GET' || c.method === 'HEAD' || graphql ? null : `a bad request was accepted (${a.status}): ${a.body.slice(0, 160)}`;
  if (!sseData && !String(a.headers['content-type'] ?? '').includes('json')) return `content-type ${a.headers['content-type']}`;
  const envelope = body?.success === false && body.statusCode === a.status && typeof body.error === 'string' && typeof body.message === 'string';
  const graphqlErrors = graphql && Array.isArray(errors) && errors.length > 0 && errors.every((e) => typeof e?.message === 'string');
  return envelope || graphqlErrors ? null : `not the error envelope (${a.status}): ${a.body.slice(0, 160)}`;
}

describe('fuzz: generated bad requests against one server', () => {
  it(`${COUNT.toLocaleString('en')} requests (seed ${SEED}): no 5xx, the JSON error envelope, the data unchanged`, { timeout: 600_000 }, async () => {
    const db = t.app.database.db;
    const before = await snapshot(db);
    const sampling = Date.now();
    const cases = fc.sample(anyCase, { seed: SEED, numRuns: COUNT });
    console.info(`fuzz: ${COUNT} cases generated in ${Date.now() - sampling} ms`);
    const port = Number(new URL(t.url).port);
    const client = new Pool(t.url, { connections: CONCURRENCY, headersTimeout: 30_000, bodyTimeout: 30_000 });
    const failures: string[] = [];
    const families = new Map<string, number>();
    const statuses = new Map<number, number>();
    const started = Date.now();
    try {
      await pool(cases, CONCURRENCY, async (c) => {
        families.set(c.family, (families.get(c.family) ?? 0) + 1);
        let answer: Answer;
        try {
          if (c.raw) answer = await sendRaw(port, c.raw);
          else {
            const res = await client.request({ method: c.method as 'GET', path: c.path, headers: c.headers, body: c.body });
            answer = { status: res.statusCode, headers: res.headers, body: await res.body.text() };
          }
        } catch (err) {
          // A body over the limit may be answered (413) and the socket closed before it is all written.
          if (c.family.includes('over 1 MiB') && /closed|reset|EPIPE|socket/i.test(String((err as Error).message))) return;
          answer = { status: 0, headers: {}, body: String(err) };
        }
        statuses.set(answer.status, (statuses.get(answer.status) ?? 0) + 1);
        const why = judge(c, answer);
        if (why) failures.push(`${c.family} | ${c.method} ${c.path.slice(0, 120)} | ${String(c.raw ?? c.body ?? '').slice(0, 160)} -> ${why}`);
      });
    } finally {
      await client.close();
    }
    const seconds = (Date.now() - started) / 1000;
    console.info(
      `fuzz: ${COUNT} requests in ${seconds.toFixed(1)} s (${Math.round(COUNT / seconds)}/s); statuses ${JSON.stringify(Object.fromEntries([...statuses].sort((a, b) => a[0] - b[0])))}; families ${families.size}`,
    );
    if (failures.length) console.info(`fuzz failures (${failures.length}):\n${failures.join('\n')}`);
    expect(failures.slice(0, 25)).toEqual([]);
    expect((await fetch(`${t.url}/healthz`)).status).toBe(200);
    expect(await snapshot(db)).toEqual(before);
    // Every family was exercised, and bad input was refused as bad input (4xx), not ignored.
    expect(families.size).toBeGreaterThan(20);
    expect([...statuses.keys()].filter((s) => s >= 400 && s < 500).length).toBeGreaterThan(5);
  });
});
