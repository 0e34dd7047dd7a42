import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { revokeApiKey } from '../src/domain/shops/shops.js';
import { startTestApp, type TestApp } from './helpers.js';

let t: TestApp;
let a: { shopId: string; apiKey: string };
let b: { shopId: string; apiKey: string };

beforeAll(async () => {
  t = await startTestApp();
  a = await t.shop('Shop A');
  b = await t.shop('Shop B');
  await t.customer(a.shopId, 'a-1', 50);
  await t.customer(b.shopId, 'b-1', 50);
});
afterAll(() => t?.stop());

const body = { customerIdentifier: 'a-1', amount: 1 };

async function expect401(res: Response) {
  expect(res.status).toBe(401);
  expect(res.headers.get('www-authenticate')).toBe('Bearer');
  expect(await res.json()).toMatchObject({ success: false, statusCode: 401, error: 'unauthorized' });
}

describe('API key authentication', () => {
  it('refuses a request with no key', async () => {
    await expect401(await t.post('/rest-api/v1/points/add', body));
  });

  it('refuses malformed, unknown and wrongly-schemed keys', async () => {
    const forged = `${a.apiKey.slice(0, -4)}AAAA`; // right prefix, wrong secret
    for (const header of ['Bearer nope', `Bearer ${forged}`, `Basic ${a.apiKey}`, a.apiKey, 'Bearer ']) {
      const res = await t.post('/rest-api/v1/points/add', body, undefined, { authorization: header });
      await expect401(res);
    }
  });

  it('accepts the key case-insensitively on the scheme', async () => {
    const res = await t.post('/rest-api/v1/points/add', body, undefined, { authorization: `bearer ${a.apiKey}` });
    expect(res.status).toBe(200);
  });

  it('stores keys hashed, never in clear', async () => {
    const rows = await t.app.database.db.selectFrom('api_keys').select(['prefix', 'key_hash']).execute();
    for (const row of rows) {
      expect(row.key_hash).toMatch(/^[0-9a-f]{64}$/);
      expect([a.apiKey, b.apiKey]).not.toContain(row.key_hash);
    }
  });

  it("answers 404 for another shop's customer, and changes nothing there", async () => {
    const res = await t.post('/rest-api/v1/points/add', { customerIdentifier: 'b-1', amount: 5 }, a.apiKey);
    expect(res.status).toBe(404);
    expect((await res.json()).error).toBe('customer_not_found');
    const gql = await t.graphql(a.apiKey, '{ customer(identifier: "b-1") { points } }');
    expect(gql.data.customer).toBeNull();
    const own = await t.graphql(b.apiKey, '{ customer(identifier: "b-1") { points } }');
    expect(own.data.customer.points).toBe(50);
  });

  it('refuses a revoked key at once, over REST and GraphQL', async () => {
    const { apiKey, shopId } = await t.shop('Shop C');
    await t.customer(shopId, 'c-1', 5);
    expect((await t.post('/rest-api/v1/points/add', { customerIdentifier: 'c-1', amount: 1 }, apiKey)).status).toBe(200);
    await revokeApiKey(t.app.database.db, shopId, apiKey);
    await expect401(await t.post('/rest-api/v1/points/add', { customerIdentifier: 'c-1', amount: 1 }, apiKey));
    const gql = await t.post('/graphql', { query: '{ customer(identifier: "c-1") { points } }' }, apiKey);
    expect(gql.status).toBe(401);
    expect((await gql.json()).errors[0].extensions.code).toBe('unauthorized');
  });

  it('never writes the key into the logs', async () => {
    const lines: string[] = [];
    const { createLogger } = await import('../src/logger.js');
    const logger = createLogger('info', { write: (line: string) => lines.push(line) });
    logger.info({ req: { headers: { authorization: `Bearer ${a.apiKey}` } }, apiKey: a.apiKey }, 'request');
    expect(lines.join('')).not.toContain(a.apiKey);
    expect(lines.join('')).toContain('[redacted]');
  });
});
