import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { printSchemaSDL } from '../src/graphql/schema.js';
import { startTestApp, type TestApp } from './helpers.js';

let t: TestApp;
let shop: { shopId: string; apiKey: string };

beforeAll(async () => {
  t = await startTestApp();
  shop = await t.shop();
});
afterAll(() => t?.stop());

const MUTATION = (field: string) => `mutation($input: PointsChangeInput!) {
  ${field}(input: $input) {
    activity { _id type settingType description note oldPoints newPoints customer shop createdAt updatedAt }
    customer { points }
    userErrors { code field message }
  }
}`;

/** Runs one operation through REST and through GraphQL and returns both results. */
async function both(restPath: string, field: string, input: Record<string, unknown>) {
  const rest = await t.post(`/rest-api/v1/points/${restPath}`, input, shop.apiKey);
  const restBody = await rest.json();
  const gql = await t.graphql(shop.apiKey, MUTATION(field), { input });
  return { rest, restBody, gql: gql.data?.[field], gqlErrors: gql.errors };
}

describe('GraphQL and REST run one domain', () => {
  it('gives the same activity for the same operation', async () => {
    await t.customer(shop.shopId, 'p-1', 100);
    for (const [path, field, amount] of [['add', 'pointsAdd', 10], ['substract', 'pointsSubtract', 3], ['update', 'pointsSet', 40]] as const) {
      const { restBody, gql } = await both(path, field, { customerIdentifier: 'p-1', amount, description: 'same', note: 'n' });
      const strip = (a: Record<string, unknown>) => {
        const { _id, oldPoints, newPoints, createdAt, updatedAt, ...rest } = a;
        return { ...rest, delta: (newPoints as number) - (oldPoints as number) };
      };
      expect(gql.userErrors).toEqual([]);
      expect(Object.keys(gql.activity).sort()).toEqual(Object.keys(restBody.activity).sort());
      if (field !== 'pointsSet') expect(strip(gql.activity)).toEqual(strip(restBody.activity));
      else expect(gql.activity.newPoints).toBe(restBody.activity.newPoints);
      // GraphQL ran after REST on the same ledger.
      expect(gql.activity.oldPoints).toBe(restBody.activity.newPoints);
      expect(gql.customer.points).toBe(gql.activity.newPoints);
    }
  });

  it('gives the same error codes: customer_not_found, insufficient_points, validation_error', async () => {
    const missing = await both('add', 'pointsAdd', { customerIdentifier: 'ghost', amount: 1 });
    expect(missing.rest.status).toBe(404);
    expect(missing.gql.userErrors).toEqual([{ code: missing.restBody.error, field: ['input', 'customerIdentifier'], message: missing.restBody.message }]);
    expect(missing.gql.activity).toBeNull();

    const tooMuch = await both('substract', 'pointsSubtract', { customerIdentifier: 'p-1', amount: 100_000 });
    expect(tooMuch.rest.status).toBe(422);
    expect(tooMuch.gql.userErrors[0].code).toBe(tooMuch.restBody.error);
    expect(tooMuch.restBody.error).toBe('insufficient_points');

    const negative = await both('add', 'pointsAdd', { customerIdentifier: 'p-1', amount: -1 });
    expect(negative.rest.status).toBe(400);
    expect(negative.restBody.error).toBe('validation_error');
    // Invalid input is a userError like any other refusal, its field a path under `input`: not a top-level error.
    expect(negative.gqlErrors).toBeUndefined();
    expect(negative.gql.activity).toBeNull();
    expect(negative.gql.userErrors).toEqual([
      { code: 'validation_error', field: ['input', 'amount'], message: negative.restBody.details[0].message },
    ]);
  });

  it('rejects malformed operations as GraphQL errors, never a 500', async () => {
    const bad = await t.post('/graphql', { query: '{ customer(identifier: 5) { points } }' }, shop.apiKey);
    expect(bad.status).toBeLessThan(500);
    expect((await bad.json()).errors.length).toBeGreaterThan(0);
    const syntax = await t.post('/graphql', { query: 'mutation {' }, shop.apiKey);
    expect(syntax.status).toBeLessThan(500);
    const wrongType = await t.graphql(shop.apiKey, MUTATION('pointsAdd'), { input: { customerIdentifier: 'p-1', amount: '5' } });
    expect(wrongType.errors[0].message).toMatch(/Int/);
  });

  it('upserts customers and reports conflicts as userErrors', async () => {
    const upsert = `mutation($input: CustomerInput!) { customerUpsert(input: $input) { created customer { _id email birthday points } userErrors { code field } } }`;
    const a = await t.graphql(shop.apiKey, upsert, { input: { shopifyCustomerId: 'u-1', email: 'U1@example.com', birthday: '1990-01-31' } });
    expect(a.data.customerUpsert).toMatchObject({ created: true, customer: { email: 'U1@example.com', birthday: '1990-01-31', points: 0 }, userErrors: [] });
    const b = await t.graphql(shop.apiKey, upsert, { input: { shopifyCustomerId: 'u-1', email: 'u1.new@example.com' } });
    expect(b.data.customerUpsert).toMatchObject({ created: false, customer: { _id: a.data.customerUpsert.customer._id, email: 'u1.new@example.com', birthday: '1990-01-31' } });
    await t.graphql(shop.apiKey, upsert, { input: { shopifyCustomerId: 'u-2', email: 'taken@example.com' } });
    const clash = await t.graphql(shop.apiKey, upsert, { input: { shopifyCustomerId: 'u-3', email: 'TAKEN@example.com' } });
    expect(clash.data.customerUpsert.userErrors).toEqual([{ code: 'email_taken', field: ['input', 'email'] }]);
    const invalid = await t.graphql(shop.apiKey, upsert, { input: { shopifyCustomerId: 'u-4', email: 'not-an-email' } });
    expect(invalid.errors).toBeUndefined();
    expect(invalid.data.customerUpsert).toMatchObject({ customer: null, userErrors: [{ code: 'validation_error', field: ['input', 'email'] }] });
  });

  it('pages activities newest first with keyset cursors', async () => {
    await t.customer(shop.shopId, 'page-1', 0);
    for (let i = 1; i <= 7; i++) await t.post('/rest-api/v1/points/add', { customerIdentifier: 'page-1', amount: i }, shop.apiKey);
    const q = `query($after: String) { customer(identifier: "page-1") { points activities(first: 3, after: $after) {
      edges { cursor node { newPoints } } pageInfo { hasNextPage endCursor } } } }`;
    const seen: number[] = [];
    let after: string | null = null;
    let pages = 0;
    for (;;) {
      const res: any = await t.graphql(shop.apiKey, q, { after });
      const conn = res.data.customer.activities;
      seen.push(...conn.edges.map((e: any) => e.node.newPoints));
      pages++;
      if (!conn.pageInfo.hasNextPage) break;
      after = conn.pageInfo.endCursor;
    }
    expect(pages).toBe(3);
    expect(seen).toEqual([28, 21, 15, 10, 6, 3, 1]);
    const badCursor = await t.graphql(shop.apiKey, q, { after: 'garbage' });
    expect(badCursor.errors[0].extensions.code).toBe('validation_error');
  });

  it('lists customers by e-mail prefix, and returns null for an unknown customer', async () => {
    const res = await t.graphql(shop.apiKey, '{ customers(first: 10, emailPrefix: "P") { edges { node { shopifyCustomerId } } } }');
    expect(res.data.customers.edges.map((e: any) => e.node.shopifyCustomerId)).toEqual(['p-1', 'page-1']);
    const none = await t.graphql(shop.apiKey, '{ customer(identifier: "nobody") { points } }');
    expect(none).toEqual({ data: { customer: null } });
  });

  it('serves GraphiQL on GET', async () => {
    const res = await fetch(`${t.url}/graphql`, { headers: { accept: 'text/html' } });
    expect(res.status).toBe(200);
    expect(await res.text()).toContain('GraphiQL');
  });
});

describe('schema.graphql', () => {
  it('is the schema printed from the code (run `npm run schema:print` when this fails)', () => {
    const checkedIn = readFileSync(new URL('../schema.graphql', import.meta.url), 'utf8');
    expect(checkedIn).toBe(printSchemaSDL());
  });
});

describe('cursors', () => {
  it('offers first and after on every connection, and neither last nor before, which it could not honour', async () => {
    const connectionFields = (await t.graphql(shop.apiKey, `{ __schema { types { name fields { name type { name ofType { name } } args { name } } } } }`))
      .data.__schema.types.flatMap((type: any) => (type.fields ?? []).map((f: any) => ({ ...f, on: type.name })))
      .filter((f: any) => (f.type.ofType?.name ?? f.type.name ?? '').endsWith('Connection'));
    // customers, pointsRedemptions, webhookSubscriptions, webhookDeliveries, shopifyWebhooks, the shop's activities, auditLog;
    // a customer's activities, discountCodes, referees, orders, pendingEarns and mailMessages.
    expect(connectionFields.length).toBe(13);
    for (const field of connectionFields) {
      const args = field.args.map((a: any) => a.name);
      expect(args, `${field.on}.${field.name}`).toEqual(expect.arrayContaining(['first', 'after']));
      expect(args, `${field.on}.${field.name}`).not.toContain('last');
      expect(args, `${field.on}.${field.name}`).not.toContain('before');
    }
    const res = await t.post('/graphql', { query: '{ customers(last: 5) { edges { cursor } } }' }, shop.apiKey);
    expect(res.status).toBeLessThan(500);
    expect((await res.json()).errors[0].message).toMatch(/Unknown argument "last"/);
  });

  it('lists the shop\'s whole ledger newest first, page by page, with each entry\'s holder, and never another shop\'s', async () => {
    const other = await t.shop('Other ledger shop');
    await t.customer(other.shopId, 'p-other', 5);
    await t.customer(shop.shopId, 'p-2', 7);
    const db = t.app.database.db;
    const ledger = await db.selectFrom('activities as a').innerJoin('customers as c', 'c.id', 'a.customer_id').select(['a.id', 'c.email']).where('a.shop_id', '=', shop.shopId).orderBy('a.seq', 'desc').execute();
    expect(ledger.length).toBeGreaterThan(4);
    const seen: Array<[string, string]> = [];
    let after: string | null = null;
    do {
      const res: any = await t.graphql(shop.apiKey, 'query($after: String) { activities(first: 2, after: $after) { edges { node { _id holder { email } } } pageInfo { hasNextPage endCursor } } }', { after });
      expect(res.errors).toBeUndefined();
      seen.push(...res.data.activities.edges.map((e: any) => [e.node._id, e.node.holder.email]));
      after = res.data.activities.pageInfo.hasNextPage ? res.data.activities.pageInfo.endCursor : null;
    } while (after);
    expect(seen).toEqual(ledger.map((r) => [r.id, r.email]));
  });

  it('refuses a tampered activities cursor with validation_error, never a 500', async () => {
    const tampered = Buffer.from(JSON.stringify(['abc'])).toString('base64url');
    const res = await t.graphql(shop.apiKey, `{ customer(identifier: "p-1") { activities(first: 1, after: "${tampered}") { edges { cursor } } } }`);
    expect(res.errors[0].extensions.code).toBe('validation_error');
  });
});
