import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from './helpers.js';
import { sse, until } from './live-helpers.js';

let t: TestApp;
let shop: { shopId: string; apiKey: string };

beforeAll(async () => {
  t = await startTestApp({ WEBHOOK_ALLOWED_HOSTS: '127.0.0.1' });
  shop = await t.shop();
  await t.customer(shop.shopId, 'idem-1', 100);
});
afterAll(() => t?.stop());

async function balance(id: string) {
  const res = await t.graphql(shop.apiKey, `{ customer(identifier: "${id}") { points activities(first: 250) { edges { node { _id } } } } }`);
  return { points: res.data.customer.points as number, entries: res.data.customer.activities.edges.length as number };
}

describe('Idempotency-Key', () => {
  it('replays the stored response and changes nothing the second time', async () => {
    const headers = { 'idempotency-key': 'order-1001-points' };
    const body = { customerIdentifier: 'idem-1', amount: 10 };
    const first = await t.post('/rest-api/v1/points/add', body, shop.apiKey, headers);
    const firstJson = await first.json();
    const before = await balance('idem-1');
    const second = await t.post('/rest-api/v1/points/add', body, shop.apiKey, headers);
    expect(second.status).toBe(first.status);
    expect(second.headers.get('idempotent-replayed')).toBe('true');
    expect(await second.json()).toEqual(firstJson);
    expect(await balance('idem-1')).toEqual(before);
    expect(before.points).toBe(110);
  });

  it('applies once when many requests with one key race', async () => {
    await t.customer(shop.shopId, 'idem-2', 0);
    const headers = { 'idempotency-key': 'race-key' };
    const responses = await Promise.all(
      Array.from({ length: 12 }, () => t.post('/rest-api/v1/points/add', { customerIdentifier: 'idem-2', amount: 5 }, shop.apiKey, headers)),
    );
    const bodies = await Promise.all(responses.map((r) => r.json()));
    expect(responses.every((r) => r.status === 200)).toBe(true);
    const ids = new Set(bodies.map((b) => b.activity._id));
    expect(ids.size).toBe(1);
    const after = await balance('idem-2');
    expect(after.points).toBe(5);
    expect(after.entries).toBe(1); // one add (an opening balance of 0 writes no entry)
  });

  it('refuses the same key with another body: 422 idempotency_key_reused', async () => {
    const headers = { 'idempotency-key': 'reuse-me' };
    await t.post('/rest-api/v1/points/add', { customerIdentifier: 'idem-1', amount: 1 }, shop.apiKey, headers);
    const res = await t.post('/rest-api/v1/points/add', { customerIdentifier: 'idem-1', amount: 2 }, shop.apiKey, headers);
    expect(res.status).toBe(422);
    expect(await res.json()).toMatchObject({ success: false, statusCode: 422, error: 'idempotency_key_reused' });
    const other = await t.post('/rest-api/v1/points/substract', { customerIdentifier: 'idem-1', amount: 1 }, shop.apiKey, headers);
    expect(other.status).toBe(422);
  });

  it('replays error responses too (a 422 stays a 422)', async () => {
    const headers = { 'idempotency-key': 'too-much' };
    const body = { customerIdentifier: 'idem-1', amount: 1_000_000 };
    const a = await t.post('/rest-api/v1/points/substract', body, shop.apiKey, headers);
    const b = await t.post('/rest-api/v1/points/substract', body, shop.apiKey, headers);
    expect([a.status, b.status]).toEqual([422, 422]);
    expect(b.headers.get('idempotent-replayed')).toBe('true');
  });

  it('scopes keys per shop', async () => {
    const other = await t.shop('Other');
    await t.customer(other.shopId, 'idem-1', 0);
    const headers = { 'idempotency-key': 'order-1001-points' };
    const res = await t.post('/rest-api/v1/points/add', { customerIdentifier: 'idem-1', amount: 10 }, other.apiKey, headers);
    expect(res.headers.get('idempotent-replayed')).toBeNull();
    expect((await res.json()).activity.newPoints).toBe(10);
  });

  it('works on GraphQL POSTs, racing included', async () => {
    await t.customer(shop.shopId, 'idem-3', 0);
    const query = 'mutation($input: PointsChangeInput!) { pointsAdd(input: $input) { activity { _id newPoints } userErrors { code } } }';
    const headers = { 'idempotency-key': 'gql-1' };
    const results = await Promise.all(
      Array.from({ length: 6 }, () => t.graphql(shop.apiKey, query, { input: { customerIdentifier: 'idem-3', amount: 3 } }, headers)),
    );
    expect(new Set(results.map((r) => r.data.pointsAdd.activity._id)).size).toBe(1);
    expect((await balance('idem-3')).points).toBe(3);
    const reused = await t.post('/graphql', { query, variables: { input: { customerIdentifier: 'idem-3', amount: 4 } } }, shop.apiKey, headers);
    expect(reused.status).toBe(422);
    // On /graphql the idempotency layer answers as GraphQL does, not in the REST envelope.
    expect(await reused.json()).toEqual({ errors: [{ message: expect.any(String), extensions: { code: 'idempotency_key_reused' } }] });
    const badKey = await t.post('/graphql', { query, variables: { input: { customerIdentifier: 'idem-3', amount: 4 } } }, shop.apiKey, { 'idempotency-key': 'bad key\u00e9' });
    expect(badKey.status).toBe(400);
    expect(await badKey.json()).toMatchObject({ errors: [{ extensions: { code: 'validation_error' } }] });
  });

  it('leaves a subscription stream unstored: the same key opens a live stream again', async () => {
    const query = 'subscription { customerPointsChanged(identifier: "idem-1") { points } }';
    const headers = { 'idempotency-key': 'sse-key' };
    const first = await sse(t.url, shop.apiKey, query, undefined, headers);
    first.close();
    await first.ended;
    const second = await sse(t.url, shop.apiKey, query, undefined, headers);
    expect([first.status, second.status]).toEqual([200, 200]);
    expect(second.contentType).toContain('text/event-stream');
    await t.post('/rest-api/v1/points/add', { customerIdentifier: 'idem-1', amount: 1 }, shop.apiKey);
    await until(() => second.events.length > 0, 10_000, 'an event on the second stream');
    expect(second.events[0]!.data.data.customerPointsChanged.points).toBeGreaterThan(0);
    second.close();
    await second.ended;
  });

  it('never stores a response carrying a secret, and never runs its request twice: a repeat is 409 idempotency_response_withheld', async () => {
    const keysBefore = (await t.graphql(shop.apiKey, '{ apiKeys { prefix } }')).data.apiKeys.length as number;
    const createKey = () =>
      t.post('/graphql', { query: 'mutation { apiKeyCreate { key userErrors { code } } }' }, shop.apiKey, { 'idempotency-key': 'new-key-1' });
    const first = await createKey();
    expect(first.status).toBe(200);
    const firstKey = (await first.json()).data.apiKeyCreate.key as string;
    expect(firstKey).toMatch(/^lk_/);
    const again = await createKey();
    expect(again.status).toBe(409);
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    // On /graphql the answer is a GraphQL response, not the REST envelope.
    const againBody = await again.json();
    expect(againBody).toEqual({ errors: [{ message: expect.stringContaining('never stored'), extensions: { code: 'idempotency_response_withheld' } }] });
    expect((await t.graphql(shop.apiKey, '{ apiKeys { prefix } }')).data.apiKeys.length).toBe(keysBefore + 1);

    const subscribe = () =>
      t.post('/rest-api/v1/webhooks/subscriptions', { topic: 'points/added', callbackUrl: 'https://127.0.0.1/hook' }, shop.apiKey, {
        'idempotency-key': 'new-hook-1',
      });
    const hook = await subscribe();
    expect(hook.status).toBe(201);
    expect(hook.headers.get('cache-control')).toBe('no-store');
    const secret = (await hook.json()).subscription.signingSecret as string;
    expect(secret).toMatch(/^[0-9a-f]{64}$/);
    const hookAgain = await subscribe();
    expect(hookAgain.status).toBe(409);
    expect(hookAgain.headers.get('idempotent-replayed')).toBe('true');
    expect(await hookAgain.json()).toMatchObject({ success: false, statusCode: 409, error: 'idempotency_response_withheld' });
    const hooks = await (await fetch(`${t.url}/rest-api/v1/webhooks/subscriptions`, { headers: { authorization: `Bearer ${shop.apiKey}` } })).json();
    expect(hooks.subscriptions.filter((s: { callbackUrl: string }) => s.callbackUrl === 'https://127.0.0.1/hook')).toHaveLength(1);

    const stored = await t.app.database.db.selectFrom('idempotency_keys').select(['key', 'response_body']).where('shop_id', '=', shop.shopId).execute();
    expect(stored.map((row) => row.key)).toEqual(expect.arrayContaining(['new-key-1', 'new-hook-1']));
    for (const row of stored) {
      for (const leaked of [firstKey, secret]) expect(row.response_body ?? '').not.toContain(leaked);
    }
  });

  it('runs a GraphQL document mixing apiKeyCreate with pointsAdd once, however often it is sent with one key', async () => {
    await t.customer(shop.shopId, 'idem-4', 0);
    const query = 'mutation { apiKeyCreate { key } pointsAdd(input: { customerIdentifier: "idem-4", amount: 7 }) { activity { newPoints } } }';
    const send = () => t.post('/graphql', { query }, shop.apiKey, { 'idempotency-key': 'mixed-1' });
    const first = await send();
    expect(first.status).toBe(200);
    expect((await first.json()).data.pointsAdd.activity.newPoints).toBe(7);
    const replies = await Promise.all([send(), send()]);
    expect(replies.map((r) => r.status)).toEqual([409, 409]);
    const after = await balance('idem-4');
    expect(after).toEqual({ points: 7, entries: 1 });
  });

  it('answers a body nested too deeply for its fingerprint with 400, as without the header', async () => {
    const deep = `${'['.repeat(400_000)}${']'.repeat(400_000)}`;
    const body = `{"customerIdentifier":"idem-1","amount":1,"description":${deep}}`;
    const withKey = await t.post('/rest-api/v1/points/add', body, shop.apiKey, { 'idempotency-key': 'deep-1' });
    const without = await t.post('/rest-api/v1/points/add', body, shop.apiKey);
    expect([withKey.status, without.status]).toEqual([400, 400]);
    expect(await withKey.json()).toMatchObject({ success: false, statusCode: 400 });
    const gqlDeep = `{"query":"{ __typename }","variables":{"x":${deep}}}`;
    const gql = await t.post('/graphql', gqlDeep, shop.apiKey, { 'idempotency-key': 'deep-2' });
    expect(gql.status).toBe(400);
    expect((await gql.json()).errors[0].extensions.code).toBe('validation_error');
    expect((await t.graphql(shop.apiKey, '{ __typename }')).data.__typename).toBe('Query');
  });

  it('rejects an unusable key with 400', async () => {
    const res = await t.post('/rest-api/v1/points/add', { customerIdentifier: 'idem-1', amount: 1 }, shop.apiKey, {
      'idempotency-key': 'x'.repeat(300),
    });
    expect(res.status).toBe(400);
  });
});
