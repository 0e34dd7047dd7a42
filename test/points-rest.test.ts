import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from './helpers.js';

let t: TestApp;
let apiKey: string;
let shopId: string;

beforeAll(async () => {
  t = await startTestApp();
  ({ apiKey, shopId } = await t.shop());
  await t.customer(shopId, 'c-1', 100);
});
afterAll(() => t?.stop());

const ACTIVITY_FIELDS = ['_id', 'type', 'settingType', 'description', 'note', 'oldPoints', 'newPoints', 'customer', 'shop', 'createdAt', 'updatedAt'];

describe('POST /points/add, /points/substract, /points/update', () => {
  it('adds points and returns the contract activity record', async () => {
    const res = await t.post('/rest-api/v1/points/add', { customerIdentifier: 'c-1', amount: 25, description: 'order #1', note: 'n' }, apiKey);
    expect(res.status).toBe(200);
    const body = await res.json();
    expect(body.success).toBe(true);
    expect(Object.keys(body.activity).sort()).toEqual([...ACTIVITY_FIELDS].sort());
    expect(body.activity).toMatchObject({ type: 'add_points', oldPoints: 100, newPoints: 125, description: 'order #1', note: 'n', shop: shopId });
    expect(body.activity.createdAt).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
  });

  it('subtracts on the contract spelling and on the alias, matching e-mail case-insensitively', async () => {
    const a = await (await t.post('/rest-api/v1/points/substract', { customerIdentifier: 'C-1@Example.com', amount: 5 }, apiKey)).json();
    expect(a.activity).toMatchObject({ type: 'subtract_points', oldPoints: 125, newPoints: 120 });
    const b = await (await t.post('/rest-api/v1/points/subtract', { customerIdentifier: 'c-1', amount: 20 }, apiKey)).json();
    expect(b.activity).toMatchObject({ type: 'subtract_points', oldPoints: 120, newPoints: 100 });
  });

  it('update sets an absolute balance, zero included', async () => {
    const a = await (await t.post('/rest-api/v1/points/update', { customerIdentifier: 'c-1', amount: 7 }, apiKey)).json();
    expect(a.activity).toMatchObject({ type: 'update_points', oldPoints: 100, newPoints: 7 });
    const b = await (await t.post('/rest-api/v1/points/update', { customerIdentifier: 'c-1', amount: 0 }, apiKey)).json();
    expect(b.activity).toMatchObject({ oldPoints: 7, newPoints: 0 });
    await t.post('/rest-api/v1/points/update', { customerIdentifier: 'c-1', amount: 100 }, apiKey);
  });

  it('refuses a subtraction beyond the balance with 422 insufficient_points', async () => {
    const res = await t.post('/rest-api/v1/points/substract', { customerIdentifier: 'c-1', amount: 101 }, apiKey);
    expect(res.status).toBe(422);
    expect(await res.json()).toMatchObject({ success: false, statusCode: 422, error: 'insufficient_points' });
  });

  it('answers 404 customer_not_found for an unknown customer', async () => {
    for (const path of ['add', 'substract', 'update']) {
      const res = await t.post(`/rest-api/v1/points/${path}`, { customerIdentifier: 'nobody@example.com', amount: 1 }, apiKey);
      expect(res.status).toBe(404);
      expect(await res.json()).toMatchObject({ success: false, statusCode: 404, error: 'customer_not_found' });
    }
  });

  const badBodies: Array<[string, unknown]> = [
    ['missing amount', { customerIdentifier: 'c-1' }],
    ['missing customerIdentifier', { amount: 1 }],
    ['empty customerIdentifier', { customerIdentifier: '  ', amount: 1 }],
    ['amount as string number', { customerIdentifier: 'c-1', amount: '5' }],
    ['amount wrong type', { customerIdentifier: 'c-1', amount: true }],
    ['negative amount', { customerIdentifier: 'c-1', amount: -5 }],
    ['zero amount', { customerIdentifier: 'c-1', amount: 0 }],
    ['fractional amount', { customerIdentifier: 'c-1', amount: 1.5 }],
    ['huge amount', { customerIdentifier: 'c-1', amount: 1e20 }],
    ['amount above the per-operation cap', { customerIdentifier: 'c-1', amount: 1_000_000_001 }],
    ['customerIdentifier wrong type', { customerIdentifier: 42, amount: 1 }],
    ['description wrong type', { customerIdentifier: 'c-1', amount: 1, description: 5 }],
    ['huge note', { customerIdentifier: 'c-1', amount: 1, note: 'x'.repeat(5000) }],
    ['unknown field', { customerIdentifier: 'c-1', amount: 1, ammount: 2 }],
    ['array body', [{ customerIdentifier: 'c-1', amount: 1 }]],
    ['null body', null],
    ['number body', 5],
  ];
  it.each(badBodies)('rejects %s with 400 validation_error', async (_name, body) => {
    for (const path of ['add', 'substract']) {
      const res = await t.post(`/rest-api/v1/points/${path}`, JSON.stringify(body), apiKey);
      expect(res.status).toBe(400);
      const json = await res.json();
      expect(json).toMatchObject({ success: false, statusCode: 400, error: 'validation_error' });
      expect(Array.isArray(json.details)).toBe(true);
    }
  });

  it('update accepts 0 but not -1', async () => {
    const res = await t.post('/rest-api/v1/points/update', { customerIdentifier: 'c-1', amount: -1 }, apiKey);
    expect(res.status).toBe(400);
  });

  it('rejects malformed JSON, wrong content types, empty and oversized bodies', async () => {
    const malformed = await t.post('/rest-api/v1/points/add', '{"customerIdentifier": "c-1", ', apiKey);
    expect(malformed.status).toBe(400);
    expect((await malformed.json()).error).toBe('malformed_json');

    const text = await fetch(`${t.url}/rest-api/v1/points/add`, {
      method: 'POST',
      headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'text/plain' },
      body: 'customerIdentifier=c-1&amount=1',
    });
    expect(text.status).toBe(400);
    expect((await text.json()).error).toBe('unsupported_content_type');

    const form = await fetch(`${t.url}/rest-api/v1/points/add`, {
      method: 'POST',
      headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/x-www-form-urlencoded' },
      body: 'customerIdentifier=c-1&amount=1',
    });
    expect(form.status).toBe(400);

    const empty = await fetch(`${t.url}/rest-api/v1/points/add`, {
      method: 'POST',
      headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
    });
    expect(empty.status).toBe(400);
    expect((await empty.json()).success).toBe(false);

    const big = await t.post('/rest-api/v1/points/add', { customerIdentifier: 'c-1', amount: 1, note: 'x'.repeat(1024 * 1024) }, apiKey);
    expect(big.status).toBe(413);
    expect(await big.json()).toMatchObject({ success: false, statusCode: 413, error: 'payload_too_large' });
  });

  it('answers unknown routes with a JSON 404 and wrong methods with 405', async () => {
    const missing = await fetch(`${t.url}/rest-api/v1/points/multiply`, { method: 'POST', headers: { authorization: `Bearer ${apiKey}` } });
    expect(missing.status).toBe(404);
    expect(await missing.json()).toMatchObject({ success: false, error: 'not_found' });
    const wrong = await fetch(`${t.url}/rest-api/v1/points/add`, { headers: { authorization: `Bearer ${apiKey}` } });
    expect(wrong.status).toBe(405);
    expect(wrong.headers.get('allow')).toContain('POST');
    expect(await wrong.json()).toMatchObject({ success: false, error: 'method_not_allowed' });
  });

  it('leaves the balance equal to the last activity after all of the above', async () => {
    const { db } = t.app.database;
    const customer = await db.selectFrom('customers').selectAll().where('shopify_customer_id', '=', 'c-1').executeTakeFirstOrThrow();
    const last = await db.selectFrom('activities').selectAll().where('customer_id', '=', customer.id).orderBy('seq', 'desc').executeTakeFirstOrThrow();
    expect(customer.points).toBe(last.new_points);
    expect(customer.points).toBe(100);
  });
});
