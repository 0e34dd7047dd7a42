import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from './helpers.js';

// The rate limiter's clock stands still, so Retry-After and the reset are the same for both sends.
const NOW = 1_800_000_000_000;
let t: TestApp;
let shop: { shopId: string; apiKey: string };
let limited: { shopId: string; apiKey: string };

beforeAll(async () => {
  t = await startTestApp({}, { clock: () => NOW });
  shop = await t.shop();
  await t.customer(shop.shopId, 'r-1', 5);
  limited = await t.shop('Limited');
  const settings = await t.graphql(limited.apiKey, 'mutation { shopSettingsUpdate(input: { rateLimitPerMinute: 1 }) { userErrors { code } } }');
  expect(settings.data.shopSettingsUpdate.userErrors).toEqual([]);
});
afterAll(() => t?.stop());

type Case = { body: unknown; apiKey?: string | null };

const ADD = 'mutation($input: PointsChangeInput!) { pointsAdd(input: $input) { activity { type description } customer { email } userErrors { code field message } } }';
const cases: Record<string, Case> = {
  'query': { body: { query: 'query C($id: String!) { customer(identifier: $id) { email } }', variables: { id: 'r-1' } } },
  'mutation': { body: { query: ADD, variables: { input: { customerIdentifier: 'r-1', amount: 1, description: 'same' } } } },
  'userErrors': { body: { query: ADD, variables: { input: { customerIdentifier: 'nobody', amount: 1 } } } },
  'domain error in input': { body: { query: ADD, variables: { input: { customerIdentifier: 'r-1', amount: -1 } } } },
  'validation error': { body: { query: '{ nope }' } },
  'variables of the wrong type': { body: { query: ADD, variables: { input: { customerIdentifier: 'r-1', amount: 'x' } } } },
  'parse error': { body: { query: '{ customer(' } },
  'no operation of that name': { body: { query: '{ __typename }', operationName: 'Other' } },
  'unauthenticated': { body: { query: '{ __typename }' }, apiKey: null },
  'rate limited': { body: { query: ADD, variables: { input: { customerIdentifier: 'r-1', amount: 1 } } }, apiKey: 'limited' },
  'no query': { body: { variables: {} } },
  'query not a string': { body: { query: 1 } },
  'unexpected parameter': { body: { query: '{ __typename }', extra: true } },
  'batch': { body: [{ query: '{ __typename }' }] },
  'subscription': { body: { query: 'subscription { events(topics: ["points/*"]) { id } }' } },
  'subscription picked by name': { body: { query: 'query Q { __typename } subscription S { events(topics: ["points/*"]) { id } }', operationName: 'S' } },
  'query picked by name': { body: { query: 'query Q { __typename } subscription S { events(topics: ["points/*"]) { id } }', operationName: 'Q' } },
  'the word subscription in a string': { body: { query: '{ customer(identifier: "subscription") { email } }' } },
  'null and empty parameters': { body: { query: '{ __typename }', variables: null, operationName: null, extensions: {} } },
  'a null unknown parameter': { body: { query: '{ __typename }', extra: null } },
  'variables not an object': { body: { query: '{ __typename }', variables: [1] } },
  'extensions not an object': { body: { query: '{ __typename }', extensions: 'x' } },
  'operationName not a string': { body: { query: '{ __typename }', operationName: 1 } },
};
const accepts = [
  undefined,
  '*/*',
  'application/json',
  'application/graphql-response+json',
  'application/graphql-response+json, application/json',
  'application/json; charset=latin1, application/graphql-response+json',
  'text/html, application/*;q=0.9',
  'application/xml',
];

/** A query string sends the request through Yoga's whole HTTP handling: Yoga's own answer. */
async function send(c: Case, accept: string | undefined, viaYoga: boolean) {
  const key = c.apiKey === null ? undefined : c.apiKey === 'limited' ? limited.apiKey : shop.apiKey;
  const abort = new AbortController();
  const res = await fetch(`${t.url}/graphql${viaYoga ? '?via=yoga' : ''}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(key ? { authorization: `Bearer ${key}` } : {}), ...(accept ? { accept } : {}) },
    body: JSON.stringify(c.body),
    signal: abort.signal,
  });
  const headers = Object.fromEntries(res.headers);
  // Per request, or counting down between the two sends.
  for (const name of ['date', 'x-request-id', 'ratelimit-remaining']) delete headers[name];
  // A subscription's event stream never ends.
  const streaming = headers['content-type']?.includes('text/event-stream');
  const body = streaming ? '(event stream)' : await res.text();
  abort.abort();
  return { status: res.status, headers, body };
}

describe('the direct /graphql path', () => {
  for (const [name, c] of Object.entries(cases)) {
    it(`answers ${name} as Yoga does, for every Accept`, async () => {
      for (const accept of accepts) {
        const direct = await send(c, accept, false);
        const yoga = await send(c, accept, true);
        expect({ accept, ...direct }).toEqual({ accept, ...yoga });
      }
    });
  }

  it('covers the statuses that matter', async () => {
    const status = async (c: Case, accept?: string) => (await send(c, accept, false)).status;
    expect(await status(cases['mutation']!)).toBe(200);
    expect(await status(cases['userErrors']!)).toBe(200);
    expect(await status(cases['validation error']!, 'application/graphql-response+json')).toBe(400);
    expect(await status(cases['parse error']!, 'application/graphql-response+json')).toBe(400);
    expect(await status(cases['unauthenticated']!)).toBe(401);
    expect(await status(cases['rate limited']!)).toBe(429);
    expect(await status(cases['query']!, 'application/xml')).toBe(406);
    expect(await send(cases['subscription']!, undefined, false)).toMatchObject({ status: 200, headers: { 'content-type': 'text/event-stream' } });
    expect(await status(cases['subscription']!, 'application/json')).toBe(406);
  });
});
