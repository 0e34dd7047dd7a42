import { execute, parse } from 'graphql';
import type { Kysely } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Database } from '../src/db/schema.js';
import { toCustomer } from '../src/domain/customers/customers.js';
import { newId } from '../src/domain/kernel/ids.js';
import { changePoints, listActivities } from '../src/domain/ledger/points.js';
import { upsertCustomer } from '../src/domain/program/sign-up.js';
import { listDiscountCodes } from '../src/domain/codes/discount-codes.js';
import { createPointsRedemption, redeemPoints } from '../src/domain/rewards/redemptions.js';
import { ensureReferralCode, listReferees, registerReferral } from '../src/domain/rewards/referrals.js';
import { createShop, type Shop } from '../src/domain/shops/shops.js';
import { getDelivery } from '../src/domain/webhooks/webhook-deliveries.js';
import { toConnection } from '../src/graphql/connections.js';
import { schema } from '../src/graphql/schema.js';
import { openLoggedPglite } from './helpers.js';

const CUSTOMERS = 250;
const DELIVERIES = 100;

let db: Kysely<Database>;
let shop: Shop;
/** Every SQL statement that reached the database, in order. */
let statements: string[] = [];

const CUSTOMERS_PAGE = `query($first: Int) {
  customers(first: $first) {
    edges { node {
      _id email points referralCode
      activities(first: 3) { edges { cursor node { _id type oldPoints newPoints } } pageInfo { hasNextPage endCursor } }
      discountCodes(first: 2) { edges { node { code value } } pageInfo { hasNextPage } }
      referees(first: 2) { edges { node { email points } } pageInfo { hasNextPage } }
    } }
  }
}`;
const DELIVERIES_PAGE = `query($first: Int) {
  webhookDeliveries(first: $first) { edges { node { id payload attempts { id url responseStatus } } } }
}`;

/** Runs a query as the shop, counting the statements it sends. */
async function run(query: string, variables: Record<string, unknown>) {
  statements = [];
  const result = await execute({ schema, document: parse(query), variableValues: variables, contextValue: { db, shop } });
  expect(result.errors).toBeUndefined();
  return { data: result.data as any, statements: statements.length };
}

beforeAll(async () => {
  db = await openLoggedPglite((sql) => statements.push(sql));
  shop = (await createShop(db, 'Batching shop')).shop;
  const { pointsRedemption } = await createPointsRedemption(db, shop.id, { name: '5 off', type: 'amount', discountPrefix: 'B-', rewardValue: 10, discountValue: 5 });
  for (let i = 0; i < CUSTOMERS; i++) {
    const id = `c-${String(i).padStart(3, '0')}`;
    await upsertCustomer(db, shop.id, { shopifyCustomerId: id, email: `${id}@example.com` });
    // Lists of every length around the pages asked for: 0..4 activities, 0..2 codes.
    for (let n = 0; n < i % 5; n++) await changePoints(db, shop.id, 'add', { customerIdentifier: id, amount: 10 + n });
    for (let n = 0; n < Math.min(i % 5, i % 3); n++) await redeemPoints(db, shop.id, { customerIdentifier: id, rewardId: pointsRedemption._id, pointsAmount: 10 });
  }
  // Referrers with 0..3 referees.
  for (let i = 0; i < 30; i++) {
    const row = await db.selectFrom('customers').selectAll().where('shop_id', '=', shop.id).where('shopify_customer_id', '=', `c-${String(i).padStart(3, '0')}`).executeTakeFirstOrThrow();
    const code = await ensureReferralCode(db, shop.id, toCustomer(row));
    for (let n = 0; n < i % 4; n++) {
      await registerReferral(db, shop.id, { referralCode: code, customer: { shopifyCustomerId: `r-${i}-${n}`, email: `r-${i}-${n}@example.com` } });
    }
  }
  const subscriptionId = newId();
  for (let i = 0; i < DELIVERIES; i++) {
    const id = newId();
    await db
      .insertInto('webhook_deliveries')
      .values({ id, shop_id: shop.id, subscription_id: subscriptionId, event_id: `evt_${i}`, topic: 'points/added', status: 'failed', payload: `{"n":${i}}`, due_at: null, next_attempt_at: null, last_attempt_at: null, last_response_status: null, last_error: null, lease_token: null, status_before_send: null })
      .execute();
    for (let n = 0; n < i % 3; n++) {
      await db
        .insertInto('webhook_delivery_attempts')
        .values({ id: newId(), delivery_id: id, attempted_at: new Date(Date.UTC(2026, 10, 23, 0, 0, n)), trigger: 'scheduled', url: `https://example.com/${n}`, response_status: 500, duration_ms: 3, error: null, response_body: null })
        .execute();
    }
  }
}, 300_000);

afterAll(async () => {
  await db?.destroy();
});

describe('per-node fields of a list are batched', () => {
  it(`answers ${CUSTOMERS} customers with their activities, codes, referees and referral codes in a few statements, as many as for 10`, async () => {
    const first = await run(CUSTOMERS_PAGE, { first: CUSTOMERS });
    expect(first.data.customers.edges).toHaveLength(CUSTOMERS);
    const again = await run(CUSTOMERS_PAGE, { first: CUSTOMERS });
    const few = await run(CUSTOMERS_PAGE, { first: 10 });
    // customers, activities, discount codes, referees, referral codes: reads only, the first time too.
    expect(first.statements).toBe(5);
    expect(again.statements).toBe(5);
    expect(few.statements).toBe(again.statements);
    expect(again.data).toEqual(first.data);
  });

  it('gives each node what the one-customer queries give', async () => {
    const { data } = await run(CUSTOMERS_PAGE, { first: CUSTOMERS });
    let withCodes = 0;
    let withReferees = 0;
    for (const { node } of data.customers.edges) {
      const activities = toConnection(await listActivities(db, shop.id, node._id, { first: 3 }));
      expect(node.activities.edges).toEqual(activities.edges.map((e) => ({ cursor: e.cursor, node: { _id: e.node._id, type: e.node.type, oldPoints: e.node.oldPoints, newPoints: e.node.newPoints } })));
      expect(node.activities.pageInfo).toEqual({ hasNextPage: activities.pageInfo.hasNextPage, endCursor: activities.pageInfo.endCursor });
      const codes = toConnection(await listDiscountCodes(db, shop.id, node._id, { first: 2 }));
      expect(node.discountCodes).toEqual({ edges: codes.edges.map((e) => ({ node: { code: e.node.code, value: e.node.value } })), pageInfo: { hasNextPage: codes.pageInfo.hasNextPage } });
      const referees = toConnection(await listReferees(db, shop.id, node._id, { first: 2 }));
      expect(node.referees).toEqual({ edges: referees.edges.map((e) => ({ node: { email: e.node.email, points: e.node.points } })), pageInfo: { hasNextPage: referees.pageInfo.hasNextPage } });
      const stored = await db.selectFrom('referral_codes').select('code').where('customer_id', '=', node._id).executeTakeFirst();
      expect(node.referralCode).toBe(stored?.code ?? null);
      if (codes.edges.length) withCodes++;
      if (referees.edges.length) withReferees++;
    }
    // The data covers empty, partial and more-than-a-page lists.
    expect(withCodes).toBeGreaterThan(50);
    expect(withReferees).toBeGreaterThan(10);
    expect(data.customers.edges.some((e: any) => e.node.activities.pageInfo.hasNextPage)).toBe(true);
    expect(data.customers.edges.some((e: any) => e.node.referees.pageInfo.hasNextPage)).toBe(true);
  });

  it('reads referral codes without creating any: null for a customer without one, and no event', async () => {
    const counts = async () => ({
      codes: Number((await db.selectFrom('referral_codes').select((eb) => eb.fn.countAll().as('n')).executeTakeFirstOrThrow()).n),
      events: Number((await db.selectFrom('outbox_events').select((eb) => eb.fn.countAll().as('n')).executeTakeFirstOrThrow()).n),
    });
    const before = await counts();
    const { data, statements: n } = await run('query { customers(first: 50) { edges { node { referralCode } } } }', {});
    const codes = data.customers.edges.map((e: any) => e.node.referralCode);
    // The 30 referrers set up above have codes (c-000..c-029 sort first); the other 20 have none.
    expect(codes.filter((c: string | null) => c !== null)).toHaveLength(30);
    expect(codes.slice(30)).toEqual(Array(20).fill(null));
    expect(n).toBe(2);
    expect(await counts()).toEqual(before);
  });

  it('pages a nested connection after a cursor for every parent alike', async () => {
    const query = 'query($after: String) { customers(first: 250) { edges { node { _id activities(first: 1, after: $after) { edges { node { _id } } } } } } }';
    const { data } = await run(CUSTOMERS_PAGE, { first: CUSTOMERS });
    const node = data.customers.edges.find((e: any) => e.node.activities.edges.length === 3).node;
    const after = node.activities.edges[0].cursor;
    const paged = await run(query, { after });
    expect(paged.statements).toBe(2);
    const same = paged.data.customers.edges.find((e: any) => e.node._id === node._id).node;
    expect(same.activities.edges).toEqual([{ node: { _id: node.activities.edges[1].node._id } }]);
  });

  it(`answers ${DELIVERIES} deliveries with their payloads and attempts in three statements`, async () => {
    const page = await run(DELIVERIES_PAGE, { first: DELIVERIES });
    expect(page.data.webhookDeliveries.edges).toHaveLength(DELIVERIES);
    expect(page.statements).toBe(3);
    for (const { node } of page.data.webhookDeliveries.edges) {
      const detail = await getDelivery(db, shop.id, node.id);
      expect(node.payload).toBe(detail.payload);
      expect(node.attempts).toEqual(detail.attempts.map((a) => ({ id: a.id, url: a.url, responseStatus: a.responseStatus })));
    }
    expect(page.data.webhookDeliveries.edges.filter((e: any) => e.node.attempts.length === 2)).not.toHaveLength(0);
  });
});
