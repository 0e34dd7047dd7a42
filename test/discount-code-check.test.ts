import { readFileSync } from 'node:fs';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inTransaction } from '../src/db/transaction.js';
import { codeExpiry, endCode, lockCode } from '../src/domain/codes/index.js';
import { startTestApp, type TestApp } from './helpers.js';

// The checkout's question through every face: REST, the admin GraphQL and the storefront's.

let t: TestApp;
let shop: { shopId: string; apiKey: string };
let other: { shopId: string; apiKey: string };
/** Codes by what they are for: ada's (own), bob's, and one of ada's at the other shop. */
const codes: Record<string, string> = {};
let adaToken: string;

const CART = {
  currency: 'USD',
  lineItems: [
    { productId: 'shirt', variantId: 'shirt-m', collectionIds: ['summer'], quantity: 2, price: '19.99' },
    { productId: 'mug', variantId: 'mug-1', collectionIds: ['kitchen'], quantity: 1, price: '8.50' },
  ],
  shippingPrice: '4.95',
};

const CHECK = 'query($code: String!, $cart: CartInput!) { discountCodeCheck(code: $code, cart: $cart) { code applicable reason currency discount lineItems } }';

async function rest(code: string, body: unknown, apiKey = shop.apiKey) {
  const res = await t.post(`/rest-api/v1/discountCodes/${encodeURIComponent(code)}/check`, body, apiKey);
  return { status: res.status, body: (await res.json()) as any };
}

async function admin(code: string, cart: unknown, apiKey = shop.apiKey) {
  return t.graphql(apiKey, CHECK, { code, cart });
}

async function storefront(code: string, cart: unknown, token = adaToken) {
  const res = await fetch(`${t.url}/storefront/graphql`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
    body: JSON.stringify({ query: CHECK, variables: { code, cart } }),
  });
  return { status: res.status, body: (await res.json()) as any };
}

/** The answer on all three faces (the storefront as ada): the same, or the test says which differs. */
async function everyFace(code: string, cart: unknown = CART) {
  const [r, a, s] = await Promise.all([rest(code, { cart }), admin(code, cart), storefront(code, cart)]);
  expect(r.status).toBe(200);
  expect(s.status).toBe(200);
  return { rest: r.body.check, admin: a.data.discountCodeCheck, storefront: s.body.data.discountCodeCheck };
}

async function reward(apiKey: string, input: Record<string, unknown>): Promise<string> {
  const res = await t.graphql(apiKey, 'mutation($input: PointsRedemptionInput!) { pointsRedemptionCreate(input: $input) { pointsRedemption { _id } userErrors { message } } }', { input });
  expect(res.data.pointsRedemptionCreate.userErrors).toEqual([]);
  return res.data.pointsRedemptionCreate.pointsRedemption._id;
}

async function redeem(apiKey: string, customerIdentifier: string, rewardId: string, pointsAmount: number, extra: Record<string, unknown> = {}): Promise<string> {
  const res = await t.post('/rest-api/v1/pointsRedemptions', { customerIdentifier, rewardId, pointsAmount, ...extra }, apiKey);
  const body = (await res.json()) as any;
  expect(res.status, JSON.stringify(body)).toBe(200);
  return body.discountCode;
}

beforeAll(async () => {
  t = await startTestApp({ STOREFRONT_RATE_PER_CUSTOMER: '1000', STOREFRONT_RATE_PER_IP: '100000' });
  shop = await t.shop('Check shop');
  other = await t.shop('Other shop');
  await t.customer(shop.shopId, 'ada', 10_000);
  await t.customer(shop.shopId, 'bob', 1000);
  await t.customer(other.shopId, 'ada', 1000);
  const fiveOffSummer = await reward(shop.apiKey, {
    name: '$5 off summer', type: 'amount', discountPrefix: 'SUMMER-', rewardValue: 100, discountValue: 5,
    applyProductOption: 'collections', applyCollections: ['summer'], minimumRequirementType: 'purchase_amount', minimumRequirementValue: 30,
  });
  const tenPercent = await reward(shop.apiKey, { name: '10 % off', type: 'percentage', discountPrefix: 'TEN-', rewardValue: 100, discountValue: 10 });
  const freeShipping = await reward(shop.apiKey, { name: 'Free shipping', type: 'shipping', discountPrefix: 'SHIP-', rewardValue: 100 });
  const freeMug = await reward(shop.apiKey, { name: 'A mug', type: 'free_product', discountPrefix: 'MUG-', rewardValue: 100, applyVariants: ['mug-1'] });
  codes.amount = await redeem(shop.apiKey, 'ada', fiveOffSummer, 100);
  codes.percentage = await redeem(shop.apiKey, 'ada', tenPercent, 100);
  codes.shipping = await redeem(shop.apiKey, 'ada', freeShipping, 100);
  codes.freeProduct = await redeem(shop.apiKey, 'ada', freeMug, 100, { variantId: 'mug-1' });
  codes.euro = await redeem(shop.apiKey, 'ada', tenPercent, 100, { currencyActive: 'EUR' });
  for (const state of ['used', 'cancelled', 'expired', 'pastExpiry']) codes[state] = await redeem(shop.apiKey, 'ada', tenPercent, 100);
  codes.bobs = await redeem(shop.apiKey, 'bob', tenPercent, 100);
  codes.otherShop = await redeem(other.apiKey, 'ada', await reward(other.apiKey, { name: '10 % off', type: 'percentage', rewardValue: 100, discountValue: 10 }), 100);

  const db = t.app.database.db;
  const ada = await db.selectFrom('customers').select('id').where('shop_id', '=', shop.shopId).where('shopify_customer_id', '=', 'ada').executeTakeFirstOrThrow();
  // Due, but the scheduler has not been by yet; and one it expired (it expires only codes with an expiresAt).
  await db.updateTable('discount_codes').set({ expires_at: new Date(Date.now() - 60_000) }).where('shop_id', '=', shop.shopId).where('code', 'in', [codes.pastExpiry!, codes.expired!]).execute();
  // Ended as the order, the shop and the scheduler end codes: under the code's lock.
  const ends = { used: { status: 'used', at: new Date(), orderId: 'order-1', customerId: ada.id }, cancelled: { status: 'cancelled', at: new Date() }, expired: { status: 'expired' } } as const;
  for (const [state, end] of Object.entries(ends)) {
    await inTransaction(db, async (trx) => {
      const row = await lockCode(trx, shop.shopId, { code: codes[state]! });
      // The server's scheduler may have come by and expired the due code first: the state is what counts.
      if (row!.status === 'issued') expect((await endCode(trx, row!, end)).changed).toBe(true);
    });
  }
  const ended = await db.selectFrom('discount_codes').select(['code', 'status']).where('shop_id', '=', shop.shopId).where('code', 'in', Object.keys(ends).map((state) => codes[state]!)).execute();
  expect(Object.fromEntries(ended.map((r) => [r.code, r.status]))).toEqual(Object.fromEntries(Object.keys(ends).map((state) => [codes[state]!, state])));

  const tokenRes = await t.graphql(shop.apiKey, 'mutation($input: CustomerAccessTokenCreateInput!) { customerAccessTokenCreate(input: $input) { accessToken } }', { input: { customerIdentifier: 'ada' } });
  adaToken = tokenRes.data.customerAccessTokenCreate.accessToken;
});
afterAll(() => t?.stop());

describe('an own code, applicable, by its reward\'s terms', () => {
  it.each([
    // $5 off the summer line (39.98, over the 30.00 minimum of the eligible lines).
    ['amount', { discount: '5.00', lineItems: [0] }],
    // 10 % of 48.48 = 4.848.
    ['percentage', { discount: '4.85', lineItems: [0, 1] }],
    ['shipping', { discount: '4.95', lineItems: [] }],
    ['freeProduct', { discount: '8.50', lineItems: [1] }],
  ])('%s: the same answer on every face', async (which, expected) => {
    const answers = await everyFace(codes[which]!);
    const answer = { code: codes[which], applicable: true, reason: null, currency: 'USD', ...expected };
    expect(answers).toEqual({ rest: answer, admin: answer, storefront: answer });
  });

  it('a minimum the eligible lines do not reach', async () => {
    const cart = { ...CART, lineItems: [{ ...CART.lineItems[0]!, quantity: 1 }, CART.lineItems[1]] };
    const answers = await everyFace(codes.amount!, cart);
    const answer = { code: codes.amount, applicable: false, reason: 'minimum_not_met', currency: 'USD', discount: '0.00', lineItems: [] };
    expect(answers).toEqual({ rest: answer, admin: answer, storefront: answer });
  });

  it('in yen, and a code of another currency', async () => {
    const yen = { currency: 'JPY', lineItems: [{ productId: 'tea', quantity: 3, price: '1200' }], shippingPrice: '500' };
    expect((await everyFace(codes.percentage!, yen)).storefront).toMatchObject({ applicable: true, currency: 'JPY', discount: '360' });
    const euro = await everyFace(codes.euro!);
    for (const answer of Object.values(euro)) expect(answer).toMatchObject({ applicable: false, reason: 'currency_mismatch', discount: '0.00' });
  });
});

describe('codes that do not apply', () => {
  it.each([
    ['used', 'used'],
    ['cancelled', 'cancelled'],
    ['expired', 'expired'],
    ['pastExpiry', 'expired'],
  ])('a %s code: %s on every face', async (which, reason) => {
    const answers = await everyFace(codes[which]!);
    for (const answer of Object.values(answers)) expect(answer).toEqual({ code: codes[which], applicable: false, reason, currency: 'USD', discount: '0.00', lineItems: [] });
  });

  it('another customer\'s code: applicable to the shop, other_customer on the storefront, with nothing of the code', async () => {
    const answers = await everyFace(codes.bobs!);
    expect(answers.rest).toMatchObject({ applicable: true, discount: '4.85' });
    expect(answers.admin).toEqual(answers.rest);
    expect(answers.storefront).toEqual({ code: codes.bobs, applicable: false, reason: 'other_customer', currency: 'USD', discount: '0.00', lineItems: [] });
  });

  it('another customer\'s ended code is other_customer too: its state is not told', async () => {
    const bob = await t.graphql(shop.apiKey, 'mutation($input: CustomerAccessTokenCreateInput!) { customerAccessTokenCreate(input: $input) { accessToken } }', { input: { customerIdentifier: 'bob' } });
    const asBob = await storefront(codes.used!, CART, bob.data.customerAccessTokenCreate.accessToken);
    expect(asBob.body.data.discountCodeCheck).toMatchObject({ applicable: false, reason: 'other_customer' });
  });

  it('another shop\'s code, and no code at all: code_not_found on every face', async () => {
    for (const code of [codes.otherShop!, 'NO-SUCH-CODE']) {
      const answers = await everyFace(code);
      for (const answer of Object.values(answers)) expect(answer).toEqual({ code, applicable: false, reason: 'code_not_found', currency: 'USD', discount: '0.00', lineItems: [] });
    }
    // The other shop does find it.
    expect((await rest(codes.otherShop!, { cart: CART }, other.apiKey)).body.check).toMatchObject({ applicable: true, discount: '4.85' });
  });
});

describe('bad carts', () => {
  const BAD: Array<[string, unknown, string]> = [
    ['a float price', { ...CART, lineItems: [{ productId: 'shirt', quantity: 1, price: 19.99 }] }, 'cart.lineItems.0.price'],
    ['three decimals in USD', { ...CART, lineItems: [{ productId: 'shirt', quantity: 1, price: '19.999' }] }, 'cart.lineItems.0.price'],
    ['cents in yen', { ...CART, currency: 'JPY', lineItems: [{ productId: 'tea', quantity: 1, price: '10.50' }], shippingPrice: '0' }, 'cart.lineItems.0.price'],
    ['a negative shipping price', { ...CART, shippingPrice: '-1.00' }, 'cart.shippingPrice'],
    ['no currency', { ...CART, currency: 'XXQ' }, 'cart.currency'],
    ['a negative quantity', { ...CART, lineItems: [{ productId: 'shirt', quantity: -1, price: '1.00' }] }, 'cart.lineItems.0.quantity'],
    ['a cart beyond any order', { ...CART, lineItems: [{ productId: 'gold', quantity: 1_000_000, price: '99999999999.99' }] }, 'cart.lineItems'],
  ];

  it.each(BAD)('%s: 400 over REST, a validation_error on both GraphQL faces', async (_name, cart, path) => {
    const r = await rest(codes.percentage!, { cart });
    expect(r.status).toBe(400);
    expect(r.body).toMatchObject({ success: false, statusCode: 400, error: 'validation_error' });
    expect(r.body.details.map((d: { path: string }) => d.path)).toContain(path);
    const a = await t.post('/graphql', { query: CHECK, variables: { code: codes.percentage, cart } }, shop.apiKey);
    const s = await storefront(codes.percentage!, cart);
    for (const [status, body] of [[a.status, await a.json()], [s.status, s.body]] as Array<[number, any]>) {
      expect(body.data?.discountCodeCheck ?? null).toBeNull();
      if (typeof (cart as any).lineItems[0]?.price === 'number') {
        // A number where the schema says String: refused by GraphQL itself, before anything runs.
        expect(status).toBe(400);
        expect(body.errors[0].message).toMatch(/String cannot represent a non string value/);
      } else {
        expect(status).toBe(200);
        expect(body.errors[0].extensions).toMatchObject({ code: 'validation_error' });
        expect(body.errors[0].extensions.details.map((d: { path: string }) => d.path)).toContain(path);
      }
    }
  });

  it('a body without a cart, or with unknown fields: 400', async () => {
    expect((await rest(codes.percentage!, {})).status).toBe(400);
    expect((await rest(codes.percentage!, { cart: { ...CART, coupon: 'x' } })).status).toBe(400);
    expect((await rest(codes.percentage!, 'not json')).status).toBe(400);
  });
});

describe('rate limits', () => {
  it('the REST check and discountCodeCheck share one bucket of the shop\'s', async () => {
    const limited = await t.shop('Limited shop');
    await t.app.database.db.updateTable('shops').set({ rate_limit_per_minute: 4 }).where('id', '=', limited.shopId).execute();
    for (let i = 0; i < 2; i++) expect((await rest('ANY', { cart: CART }, limited.apiKey)).status).toBe(200);
    for (let i = 0; i < 2; i++) expect((await admin('ANY', CART, limited.apiKey)).data.discountCodeCheck.reason).toBe('code_not_found');
    const refused = await t.post('/graphql', { query: CHECK, variables: { code: 'ANY', cart: CART } }, limited.apiKey);
    expect(refused.status).toBe(429);
    expect(await rest('ANY', { cart: CART }, limited.apiKey)).toMatchObject({ status: 429, body: { error: 'rate_limited' } });
  });
});

describe('asking changes nothing', () => {
  it('no event, no code state, no balance moves, however often a checkout asks', async () => {
    const db = t.app.database.db;
    const snapshot = async () => ({
      events: (await sql<{ n: string }>`select count(*)::text as n from outbox_events`.execute(db)).rows[0]!.n,
      codes: await db.selectFrom('discount_codes').selectAll().orderBy('id').execute(),
      customers: await db.selectFrom('customers').select(['id', 'points', 'updated_at']).orderBy('id').execute(),
    });
    // The code set up past its expiresAt is the scheduler's to expire meanwhile: expired first, so
    // only the checks run between the snapshots.
    await codeExpiry.runDue(db, new Date(), 1000);
    const before = await snapshot();
    await Promise.all(Object.values(codes).flatMap((code) => [everyFace(code), rest(code, { cart: { ...CART, shippingPrice: 5 } })]));
    expect(await snapshot()).toEqual(before);
  });
});

describe('docs/api.md "Rewards at checkout"', () => {
  it('the check call answers as shown, and "used" once an order used the code', async () => {
    const docs = readFileSync(new URL('../docs/api.md', import.meta.url), 'utf8');
    const section = docs.slice(docs.indexOf('## Rewards at checkout'), docs.indexOf('## Referrals'));
    const [, shownCode, body] = /\/rest-api\/v1\/discountCodes\/([A-Z0-9-]+)\/check"[\s\S]*?-d '([^']+)'/.exec(section)!;
    const shown = /```json\n\s*(.+)\n\s*```/.exec(section)![1]!;

    const docsShop = await t.shop('Docs shop');
    await t.customer(docsShop.shopId, '7301234567890', 100);
    const fiveOff = await reward(docsShop.apiKey, { name: '$5 off', type: 'amount', discountPrefix: 'LOYAL-', rewardValue: 100, discountValue: 5 });
    const code = await redeem(docsShop.apiKey, '7301234567890', fiveOff, 100);
    const answer = await t.post(`/rest-api/v1/discountCodes/${code}/check`, JSON.parse(body!), docsShop.apiKey);
    expect(answer.status).toBe(200);
    expect(await answer.json()).toEqual(JSON.parse(shown.replaceAll(shownCode!, code)));

    const db = t.app.database.db;
    await inTransaction(db, async (trx) => {
      const row = (await lockCode(trx, docsShop.shopId, { code }))!;
      await endCode(trx, row, { status: 'used', at: new Date(), orderId: '1002', customerId: row.customer_id });
    });
    const used = await t.post(`/rest-api/v1/discountCodes/${code}/check`, JSON.parse(body!), docsShop.apiKey);
    const usedShown = /The same check now answers\s+`"check":(\{[^`]+\})`/.exec(section)![1]!;
    expect(((await used.json()) as any).check).toEqual(JSON.parse(usedShown.replaceAll(shownCode!, code)));
  });
});
