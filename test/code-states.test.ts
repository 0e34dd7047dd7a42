import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DB } from '../src/db/database.js';
import { inTransaction } from '../src/db/transaction.js';
import { type CodeEnd, endCode, lockCode } from '../src/domain/codes/index.js';
import { isolatedPostgresUrl, onPostgres, startTestApp, type TestApp } from './helpers.js';
import { sse, until } from './live-helpers.js';
import { checkLedger } from './reliability/processes.js';

/**
 * A code's life through both faces (issue 33, items 1 and 4): issued by a redemption, then exactly
 * one of used, expired or cancelled, however many try at once; cancelled with its points back at
 * most once; one shop never reaches another's codes, one customer never sees another's.
 */

const REDIS_URL = process.env.TEST_REDIS_URL;
/** Redis (shared limits and live events) when the run has one, under keys of this file's own. */
const redisEnv = (prefix = `test:${randomBytes(4).toString('hex')}:`): Record<string, string> => (REDIS_URL ? { REDIS_URL, REDIS_KEY_PREFIX: prefix } : {});

const CODE_FIELDS = 'code customer status usedAt orderId expiresAt cancelledAt usedByOtherCustomer pointsReturned';
const CANCEL = `mutation($input: DiscountCodeCancelInput!) {
  discountCodeCancel(input: $input) { discountCode { ${CODE_FIELDS} } activity { _id type oldPoints newPoints description } userErrors { code field message } }
}`;
const EVENTS = 'subscription($topics: [String!]!) { events(topics: $topics) { type data } }';

type Shop = { shopId: string; apiKey: string; rewardId: string };

let t: TestApp;
let shop: Shop;
let other: Shop;

/** A shop with a 300-point reward whose codes expire 30 days after issue. */
async function rewardShop(app: TestApp, name: string): Promise<Shop> {
  const s = await app.shop(name);
  const created = await app.graphql(s.apiKey, 'mutation($input: PointsRedemptionInput!) { pointsRedemptionCreate(input: $input) { pointsRedemption { _id } userErrors { code } } }', {
    input: { name: '$5 off', type: 'amount', discountPrefix: 'FIVE-', rewardValue: 300, discountValue: 5, expireDateType: 'days', expireDays: 30 },
  });
  return { ...s, rewardId: created.data.pointsRedemptionCreate.pointsRedemption._id };
}

async function redeem(app: TestApp, s: Shop, customerIdentifier: string): Promise<string> {
  const res = await app.post('/rest-api/v1/pointsRedemptions', { customerIdentifier, rewardId: s.rewardId, pointsAmount: 300 }, s.apiKey);
  expect(res.status).toBe(200);
  return ((await res.json()) as { discountCode: string }).discountCode;
}

async function cancelRest(app: TestApp, apiKey: string, code: string, body?: unknown, headers?: Record<string, string>) {
  const res = await fetch(`${app.url}/rest-api/v1/pointsRedemptions/${encodeURIComponent(code)}/cancel`, {
    method: 'POST',
    headers: { authorization: `Bearer ${apiKey}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }), ...headers },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: res.status, headers: res.headers, body: (await res.json()) as any };
}

async function cancelGraphql(app: TestApp, apiKey: string, code: string, returnPoints?: boolean) {
  const res = await app.graphql(apiKey, CANCEL, { input: { code, ...(returnPoints === undefined ? {} : { returnPoints }) } });
  expect(res.errors).toBeUndefined();
  return res.data.discountCodeCancel;
}

/** A code as the admin face shows it, among its customer's codes. */
async function adminCode(app: TestApp, apiKey: string, customerIdentifier: string, code: string) {
  const res = await app.graphql(apiKey, `query($id: String!) { customer(identifier: $id) { discountCodes(first: 50) { edges { node { ${CODE_FIELDS} } } } } }`, { id: customerIdentifier });
  expect(res.errors).toBeUndefined();
  return res.data.customer.discountCodes.edges.map((e: any) => e.node).find((n: any) => n.code === code);
}

/** Ends a code straight through the domain, as an order (used) or the scheduler (expired) will, in a transaction of its own. */
function endDirectly(db: DB, shopId: string, code: string, end: CodeEnd) {
  return inTransaction(db, async (trx) => endCode(trx, (await lockCode(trx, shopId, { code }))!, end));
}

async function customerId(db: DB, shopId: string, shopifyCustomerId: string): Promise<string> {
  return (await db.selectFrom('customers').select('id').where('shop_id', '=', shopId).where('shopify_customer_id', '=', shopifyCustomerId).executeTakeFirstOrThrow()).id;
}

/** The shop's outbox events of these topics about one code (its `code`) or one ledger entry (its `_id`). */
async function eventsAbout(db: DB, shopId: string, types: string[], match: (data: any) => boolean) {
  const rows = await db.selectFrom('outbox_events').select(['type', 'data']).where('shop_id', '=', shopId).where('type', 'in', types).orderBy('seq').execute();
  return rows.filter((r) => match(r.data));
}

async function refundEntries(db: DB, shopId: string, description: string) {
  return db.selectFrom('activities').selectAll().where('shop_id', '=', shopId).where('type', '=', 'refund_redemption').where('description', '=', description).execute();
}

async function balance(db: DB, shopId: string, shopifyCustomerId: string): Promise<number> {
  return (await db.selectFrom('customers').select('points').where('shop_id', '=', shopId).where('shopify_customer_id', '=', shopifyCustomerId).executeTakeFirstOrThrow()).points;
}

async function expectLedgerExact(db: DB, shopId: string) {
  expect((await checkLedger(db, shopId)).problems).toEqual([]);
}

const END_TOPICS = ['redemptions/used', 'redemptions/expired', 'redemptions/cancelled'];

beforeAll(async () => {
  t = await startTestApp({ ...redisEnv(), STOREFRONT_RATE_PER_CUSTOMER: '1000', STOREFRONT_RATE_PER_IP: '100000' });
  shop = await rewardShop(t, 'Codes shop');
  other = await rewardShop(t, 'Other shop');
});
afterAll(() => t?.stop());

const db = () => t.app.database.db;

describe('a code through REST and GraphQL', () => {
  it('is issued by a redemption, with its expiry and no end yet', async () => {
    await t.customer(shop.shopId, 'ada', 1000);
    const code = await redeem(t, shop, 'ada');
    const shown = await adminCode(t, shop.apiKey, 'ada', code);
    expect(shown).toMatchObject({ status: 'issued', usedAt: null, orderId: null, cancelledAt: null, usedByOtherCustomer: false, pointsReturned: false });
    const days = (Date.parse(shown.expiresAt) - Date.now()) / 86_400_000;
    expect(days).toBeGreaterThan(29.9);
    expect(days).toBeLessThanOrEqual(30);
    const [created] = await eventsAbout(db(), shop.shopId, ['redemptions/created'], (d) => d.code === code);
    expect(created!.data).toMatchObject({ code, status: 'issued', pointsReturned: false });
  });

  it('is cancelled over REST without and with its points: balance and ledger exact, one refund entry, its events', async () => {
    await t.customer(shop.shopId, 'bea', 1000);
    const kept = await redeem(t, shop, 'bea');
    const returned = await redeem(t, shop, 'bea');
    expect(await balance(db(), shop.shopId, 'bea')).toBe(400);

    const first = await cancelRest(t, shop.apiKey, kept); // no body: no points back
    expect(first.status).toBe(200);
    expect(first.body).toMatchObject({ success: true, message: 'Discount code cancelled', activity: null, discountCode: { code: kept, status: 'cancelled', pointsReturned: false } });
    expect(Date.now() - Date.parse(first.body.discountCode.cancelledAt)).toBeLessThan(60_000);
    expect(await balance(db(), shop.shopId, 'bea')).toBe(400);

    const second = await cancelRest(t, shop.apiKey, returned, { returnPoints: true }, { 'idempotency-key': `cancel-${returned}` });
    expect(second.status).toBe(200);
    expect(second.body.discountCode).toMatchObject({ code: returned, status: 'cancelled', pointsReturned: true });
    expect(second.body.activity).toMatchObject({ type: 'refund_redemption', settingType: 'redemption', oldPoints: 400, newPoints: 700, description: `Code ${returned} cancelled` });
    expect(await balance(db(), shop.shopId, 'bea')).toBe(700);
    // A retry with its key is the stored answer, not a 409.
    const replay = await cancelRest(t, shop.apiKey, returned, { returnPoints: true }, { 'idempotency-key': `cancel-${returned}` });
    expect(replay.status).toBe(200);
    expect(replay.headers.get('idempotent-replayed')).toBe('true');
    expect(replay.body).toEqual(second.body);

    // Once ended, never again, points or not: 409 with the state.
    for (const body of [undefined, { returnPoints: true }, { returnPoints: false }]) {
      const again = await cancelRest(t, shop.apiKey, returned, body);
      expect(again.status).toBe(409);
      expect(again.body).toEqual({ success: false, statusCode: 409, error: 'code_not_issued', message: `the code ${returned} is cancelled` });
    }
    expect(await balance(db(), shop.shopId, 'bea')).toBe(700);
    expect(await refundEntries(db(), shop.shopId, `Code ${returned} cancelled`)).toHaveLength(1);
    expect(await refundEntries(db(), shop.shopId, `Code ${kept} cancelled`)).toHaveLength(0);
    await expectLedgerExact(db(), shop.shopId);

    expect((await eventsAbout(db(), shop.shopId, END_TOPICS, (d) => d.code === kept)).map((e) => e.type)).toEqual(['redemptions/cancelled']);
    const ends = await eventsAbout(db(), shop.shopId, END_TOPICS, (d) => d.code === returned);
    expect(ends.map((e) => e.type)).toEqual(['redemptions/cancelled']);
    const refunded = await eventsAbout(db(), shop.shopId, ['points/refunded'], (d) => d._id === second.body.activity._id);
    expect(refunded).toHaveLength(1);
    expect(refunded[0]!.data).toMatchObject({ type: 'refund_redemption', oldPoints: 400, newPoints: 700 });
    // The admin face shows both ended.
    expect(await adminCode(t, shop.apiKey, 'bea', kept)).toMatchObject({ status: 'cancelled', pointsReturned: false, usedAt: null, orderId: null });
    expect(await adminCode(t, shop.apiKey, 'bea', returned)).toMatchObject({ status: 'cancelled', pointsReturned: true, cancelledAt: second.body.discountCode.cancelledAt });
  });

  it('is cancelled over GraphQL without and with its points; a second cancel is the userError code_not_issued', async () => {
    await t.customer(shop.shopId, 'cy', 900);
    const kept = await redeem(t, shop, 'cy');
    const returned = await redeem(t, shop, 'cy');

    const first = await cancelGraphql(t, shop.apiKey, kept);
    expect(first).toMatchObject({ userErrors: [], activity: null, discountCode: { code: kept, status: 'cancelled', pointsReturned: false } });
    expect(await balance(db(), shop.shopId, 'cy')).toBe(300);

    const second = await cancelGraphql(t, shop.apiKey, returned, true);
    expect(second.userErrors).toEqual([]);
    expect(second.discountCode).toMatchObject({ code: returned, status: 'cancelled', pointsReturned: true });
    expect(second.activity).toMatchObject({ type: 'refund_redemption', oldPoints: 300, newPoints: 600, description: `Code ${returned} cancelled` });
    expect(await balance(db(), shop.shopId, 'cy')).toBe(600);

    for (const returnPoints of [true, false]) {
      expect(await cancelGraphql(t, shop.apiKey, returned, returnPoints)).toEqual({
        discountCode: null,
        activity: null,
        userErrors: [{ code: 'code_not_issued', field: ['input', 'code'], message: `the code ${returned} is cancelled` }],
      });
    }
    expect(await balance(db(), shop.shopId, 'cy')).toBe(600);
    expect(await refundEntries(db(), shop.shopId, `Code ${returned} cancelled`)).toHaveLength(1);
    expect((await eventsAbout(db(), shop.shopId, END_TOPICS, (d) => d.code === returned)).map((e) => e.type)).toEqual(['redemptions/cancelled']);
    expect(await eventsAbout(db(), shop.shopId, ['points/refunded'], (d) => d._id === second.activity._id)).toHaveLength(1);
    await expectLedgerExact(db(), shop.shopId);
  });

  it('a used or an expired code answers 409 code_not_issued with its state, on both faces', async () => {
    await t.customer(shop.shopId, 'dan', 600);
    const used = await redeem(t, shop, 'dan');
    const expired = await redeem(t, shop, 'dan');
    const danId = await customerId(db(), shop.shopId, 'dan');
    const usedAt = new Date();
    expect((await endDirectly(db(), shop.shopId, used, { status: 'used', at: usedAt, orderId: 'D-1', customerId: danId })).changed).toBe(true);
    expect((await endDirectly(db(), shop.shopId, expired, { status: 'expired' })).changed).toBe(true);

    expect(await adminCode(t, shop.apiKey, 'dan', used)).toMatchObject({ status: 'used', usedAt: usedAt.toISOString(), orderId: 'D-1', usedByOtherCustomer: false, cancelledAt: null });
    expect(await adminCode(t, shop.apiKey, 'dan', expired)).toMatchObject({ status: 'expired', usedAt: null, orderId: null, cancelledAt: null });
    for (const [code, state] of [[used, 'used'], [expired, 'expired']] as const) {
      const rest = await cancelRest(t, shop.apiKey, code, { returnPoints: true });
      expect(rest.status).toBe(409);
      expect(rest.body).toMatchObject({ error: 'code_not_issued', message: `the code ${code} is ${state}` });
      expect((await cancelGraphql(t, shop.apiKey, code, true)).userErrors).toEqual([{ code: 'code_not_issued', field: ['input', 'code'], message: `the code ${code} is ${state}` }]);
    }
    expect(await balance(db(), shop.shopId, 'dan')).toBe(0);
    const ends = await eventsAbout(db(), shop.shopId, END_TOPICS, (d) => d.code === used || d.code === expired);
    expect(ends.map((e) => [e.type, (e.data as any).code])).toEqual([['redemptions/used', used], ['redemptions/expired', expired]]);
  });

  it('an unknown code is 404, another shop\'s code is 404, bad input is 400 / validation_error', async () => {
    await t.customer(other.shopId, 'ada', 300);
    const theirs = await redeem(t, other, 'ada');
    for (const code of ['FIVE-NOSUCHCODE', theirs]) {
      const rest = await cancelRest(t, shop.apiKey, code, { returnPoints: true });
      expect(rest.status).toBe(404);
      expect(rest.body).toEqual({ success: false, statusCode: 404, error: 'code_not_found', message: `this shop has no discount code ${code}` });
      expect((await cancelGraphql(t, shop.apiKey, code, true)).userErrors).toEqual([{ code: 'code_not_found', field: ['input', 'code'], message: `this shop has no discount code ${code}` }]);
    }
    // The other shop's code is untouched, and still its own to cancel.
    expect(await adminCode(t, other.apiKey, 'ada', theirs)).toMatchObject({ status: 'issued' });
    expect(await balance(db(), other.shopId, 'ada')).toBe(0);

    const badBody = await cancelRest(t, shop.apiKey, theirs, { returnPoints: 'yes' });
    expect(badBody.status).toBe(400);
    expect(badBody.body).toMatchObject({ error: 'validation_error', details: [{ path: 'returnPoints' }] });
    expect((await cancelRest(t, shop.apiKey, theirs, { returnPoints: true, extra: 1 })).status).toBe(400);
    // A path segment past Fastify's 100 characters is refused before the route, in the same envelope.
    const long = await cancelRest(t, shop.apiKey, 'X'.repeat(256));
    expect(long.body).toMatchObject({ success: false, statusCode: long.status });
    expect(long.status).toBeGreaterThanOrEqual(400);
    expect(long.status).toBeLessThan(500);
    for (const code of ['  ', 'X'.repeat(256)]) {
      const refused = await cancelGraphql(t, shop.apiKey, code);
      expect(refused.userErrors[0]).toMatchObject({ code: 'validation_error', field: ['input', 'code'] });
    }

    expect((await cancelGraphql(t, other.apiKey, theirs, true)).discountCode).toMatchObject({ status: 'cancelled', pointsReturned: true });
    expect(await balance(db(), other.shopId, 'ada')).toBe(300);
    await expectLedgerExact(db(), other.shopId);
  });

  it('the cancellation and its refund are live events too', async () => {
    await t.customer(shop.shopId, 'eve', 300);
    const code = await redeem(t, shop, 'eve');
    const stream = await sse(t.url, shop.apiKey, EVENTS, { topics: ['redemptions/cancelled', 'points/refunded'] });
    try {
      await until(() => t.app.bus.stats().listeners >= 1, 10_000, 'the SSE listener');
      const { activity } = await cancelGraphql(t, shop.apiKey, code, true);
      await until(() => stream.events.length >= 2, 10_000, 'two live events');
      const live = stream.events.map((e) => e.data.data.events);
      expect(live.map((e: any) => e.type).sort()).toEqual(['points/refunded', 'redemptions/cancelled']);
      expect(live.find((e: any) => e.type === 'redemptions/cancelled').data).toMatchObject({ code, status: 'cancelled', pointsReturned: false });
      expect(live.find((e: any) => e.type === 'points/refunded').data).toMatchObject({ _id: activity._id, type: 'refund_redemption', newPoints: 300 });
    } finally {
      stream.close();
    }
  });
});

describe('the storefront face', () => {
  async function token(customerIdentifier: string): Promise<string> {
    const res = await t.graphql(shop.apiKey, 'mutation($input: CustomerAccessTokenCreateInput!) { customerAccessTokenCreate(input: $input) { accessToken } }', { input: { customerIdentifier } });
    return res.data.customerAccessTokenCreate.accessToken;
  }
  async function myCodes(bearer: string) {
    const res = await fetch(`${t.url}/storefront/graphql`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${bearer}` },
      body: JSON.stringify({ query: `{ me { _id discountCodes(first: 50) { edges { node { ${CODE_FIELDS} } } } } }` }),
    });
    const body = (await res.json()) as any;
    expect(body.errors).toBeUndefined();
    return { me: body.data.me._id as string, codes: body.data.me.discountCodes.edges.map((e: any) => e.node) as any[] };
  }

  it('shows the customer their own codes\' states, never another customer\'s codes nor their order', async () => {
    await t.customer(shop.shopId, 'fay', 900);
    await t.customer(shop.shopId, 'gus', 300);
    const [issued, cancelled, usedByGus] = [await redeem(t, shop, 'fay'), await redeem(t, shop, 'fay'), await redeem(t, shop, 'fay')];
    const gusCode = await redeem(t, shop, 'gus');
    expect((await cancelRest(t, shop.apiKey, cancelled, { returnPoints: true })).status).toBe(200);
    const gusId = await customerId(db(), shop.shopId, 'gus');
    await endDirectly(db(), shop.shopId, usedByGus, { status: 'used', at: new Date(), orderId: 'G-7', customerId: gusId });

    const fay = await myCodes(await token('fay'));
    expect(fay.codes.every((c) => c.customer === fay.me)).toBe(true);
    const byCode = new Map(fay.codes.map((c) => [c.code, c]));
    expect([...byCode.keys()].sort()).toEqual([issued, cancelled, usedByGus].sort());
    expect(byCode.get(issued)).toMatchObject({ status: 'issued', pointsReturned: false, cancelledAt: null });
    expect(byCode.get(cancelled)).toMatchObject({ status: 'cancelled', pointsReturned: true });
    expect(byCode.get(cancelled).cancelledAt).not.toBeNull();
    // Used by Gus's order: Fay sees that it was used, not Gus's order id; the admin face sees it.
    expect(byCode.get(usedByGus)).toMatchObject({ status: 'used', usedByOtherCustomer: true, orderId: null });
    expect(byCode.get(usedByGus).usedAt).not.toBeNull();
    expect(await adminCode(t, shop.apiKey, 'fay', usedByGus)).toMatchObject({ orderId: 'G-7', usedByOtherCustomer: true });

    const gus = await myCodes(await token('gus'));
    expect(gus.codes.map((c) => c.code)).toEqual([gusCode]);
    expect(gus.codes[0]).toMatchObject({ status: 'issued', customer: gus.me });
  });
});

/**
 * 50 attempts on one code at once: REST cancels (half returning the points), GraphQL cancels, and
 * the domain's own ends for an order's use and the scheduler's expiry, each in its own transaction.
 * The domain's ends skip HTTP, so they win unless they start a little later (`domainDelayMs`).
 */
async function race(apps: TestApp[], s: Shop, customerIdentifier: string, domainDelayMs: number) {
  const app = apps[0]!;
  const appDb = app.app.database.db;
  const code = await redeem(app, s, customerIdentifier);
  const owner = await customerId(appDb, s.shopId, customerIdentifier);
  const before = await balance(appDb, s.shopId, customerIdentifier);
  type Outcome = { by: string; won: boolean; returned: boolean };
  const attempts = Array.from({ length: 50 }, async (_, i): Promise<Outcome> => {
    const on = apps[i % apps.length]!;
    switch (i % 5) {
      case 0:
      case 1: {
        const returnPoints = i % 2 === 0;
        const res = await cancelRest(on, s.apiKey, code, { returnPoints });
        if (res.status === 409) expect(res.body.error).toBe('code_not_issued');
        else expect(res.status).toBe(200);
        return { by: `rest${returnPoints ? '+points' : ''}`, won: res.status === 200, returned: res.body.activity != null };
      }
      case 2: {
        const returnPoints = i % 2 === 0;
        const payload = await cancelGraphql(on, s.apiKey, code, returnPoints);
        if (!payload.discountCode) expect(payload.userErrors.map((e: any) => e.code)).toEqual(['code_not_issued']);
        return { by: `graphql${returnPoints ? '+points' : ''}`, won: payload.discountCode !== null, returned: payload.activity !== null };
      }
      case 3: {
        await sleep(domainDelayMs);
        const { changed } = await endDirectly(on.app.database.db, s.shopId, code, { status: 'used', at: new Date(), orderId: `O-${i}`, customerId: owner });
        return { by: 'used', won: changed, returned: false };
      }
      default: {
        await sleep(domainDelayMs);
        const { changed } = await endDirectly(on.app.database.db, s.shopId, code, { status: 'expired' });
        return { by: 'expired', won: changed, returned: false };
      }
    }
  });
  const outcomes = await Promise.all(attempts);
  const winners = outcomes.filter((o) => o.won);
  expect(winners, JSON.stringify(outcomes)).toHaveLength(1);
  const winner = winners[0]!;
  expect(outcomes.filter((o) => o.returned)).toHaveLength(winner.returned ? 1 : 0);

  const row = await appDb.selectFrom('discount_codes').selectAll().where('shop_id', '=', s.shopId).where('code', '=', code).executeTakeFirstOrThrow();
  expect(row.status).toBe(winner.by.startsWith('rest') || winner.by.startsWith('graphql') ? 'cancelled' : winner.by);
  const ends = await eventsAbout(appDb, s.shopId, END_TOPICS, (d) => d.code === code);
  expect(ends.map((e) => e.type)).toEqual([`redemptions/${row.status}`]);
  const refunds = await refundEntries(appDb, s.shopId, `Code ${code} cancelled`);
  expect(refunds).toHaveLength(winner.returned ? 1 : 0);
  expect(row.returned_activity_id).toBe(refunds[0]?.id ?? null);
  expect(await eventsAbout(appDb, s.shopId, ['points/refunded'], (d) => d._id === refunds[0]?.id)).toHaveLength(refunds.length);
  expect(await balance(appDb, s.shopId, customerIdentifier)).toBe(before + (winner.returned ? 300 : 0));
  await expectLedgerExact(appDb, s.shopId);
  return winner.by;
}

describe('50 racing ends of one code', () => {
  it('one winner, every loser a 409 or no change, one end event, the points back at most once, the ledger exact', async () => {
    await t.customer(shop.shopId, 'racer', 300 * 6);
    // Which attempt wins is the race's; every round must have exactly one.
    for (let round = 0; round < 6; round++) await race([t], shop, 'racer', round % 2 ? 200 : 0);
  });
});

describe.runIf(onPostgres)('two instances on one PostgreSQL database', () => {
  it('race for one code across both: still one winner, and the ledger exact', async () => {
    const pg = await isolatedPostgresUrl();
    const env = { DATABASE_URL: pg.url, ...redisEnv() };
    const a = await startTestApp(env);
    const b = await startTestApp(env);
    try {
      const s = await rewardShop(a, 'Two instances');
      await a.customer(s.shopId, 'twin', 300 * 5);
      for (let round = 0; round < 4; round++) await race([a, b], s, 'twin', round % 2 ? 200 : 0);
      if (REDIS_URL) {
        // A subscriber on one instance hears the cancellation made on the other.
        const code = await redeem(a, s, 'twin');
        const stream = await sse(b.url, s.apiKey, EVENTS, { topics: ['redemptions/*'] });
        try {
          await until(() => b.app.bus.stats().listeners >= 1, 10_000, 'the SSE listener on b');
          expect((await cancelRest(a, s.apiKey, code)).status).toBe(200);
          await until(() => stream.events.some((e) => e.data.data.events.type === 'redemptions/cancelled'), 10_000, 'the cancellation on b');
          const cancellations = stream.events.map((e) => e.data.data.events).filter((e) => e.type === 'redemptions/cancelled');
          expect(cancellations.map((e) => e.data.code)).toEqual([code]);
        } finally {
          stream.close();
        }
      }
    } finally {
      await a.stop();
      await b.stop();
      await pg.drop();
    }
  });
});
