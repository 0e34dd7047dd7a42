import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { printSchemaSDL } from '../src/graphql/schema.js';
import { startTestApp, type TestApp } from './helpers.js';

type Shop = { shopId: string; apiKey: string };

const SEARCH = 'query($query: String!, $first: Int) { customerSearch(query: $query, first: $first) { matchedBy customer { shopifyCustomerId email points } } }';

let t: TestApp;
let shop: Shop;
let other: Shop;
let code: string;

async function search(s: Shop, query: string, first?: number) {
  const res = await t.graphql(s.apiKey, SEARCH, { query, first });
  expect(res.errors).toBeUndefined();
  return res.data.customerSearch.map((hit: any) => [hit.matchedBy, hit.customer.shopifyCustomerId]);
}

async function upsert(s: Shop, shopifyCustomerId: string, email: string) {
  const res = await t.graphql(s.apiKey, 'mutation($input: CustomerInput!) { customerUpsert(input: $input) { userErrors { code } } }', { input: { shopifyCustomerId, email } });
  expect(res.data.customerUpsert.userErrors).toEqual([]);
}

beforeAll(async () => {
  t = await startTestApp({ WORKER: 'off' });
  shop = await t.shop('Search shop');
  other = await t.shop('Other shop');
  await upsert(shop, '1001', 'Ada.Lovelace@example.com');
  await upsert(shop, '1002', 'adam@example.com');
  await upsert(shop, '1003', 'bob@example.com');
  // A customer whose e-mail starts with another's shop id: found both ways, the exact way first.
  await upsert(shop, 'ada', 'zed@example.com');
  await upsert(other, '9001', 'ada.other@example.com');
  await upsert(other, '1003', 'bob-other@example.com');

  // A discount code of bob's, bought with points.
  const reward = await t.graphql(shop.apiKey, 'mutation($input: PointsRedemptionInput!) { pointsRedemptionCreate(input: $input) { pointsRedemption { _id } userErrors { code } } }', {
    input: { name: '$5 off', type: 'amount', discountPrefix: 'FIVE-', rewardValue: 100, discountValue: 5, expireDateType: 'none' },
  });
  const rewardId = reward.data.pointsRedemptionCreate.pointsRedemption._id;
  expect((await t.post('/rest-api/v1/points/add', { customerIdentifier: '1003', amount: 100 }, shop.apiKey)).status).toBe(200);
  const redeemed = await t.post('/rest-api/v1/pointsRedemptions', { customerIdentifier: '1003', rewardId, pointsAmount: 100 }, shop.apiKey);
  expect(redeemed.status).toBe(200);
  code = ((await redeemed.json()) as { discountCode: string }).discountCode;
  expect(code).toMatch(/^FIVE-/);
}, 60_000);

afterAll(async () => {
  await t?.stop();
});

describe('customerSearch', () => {
  it('finds by e-mail prefix, case-insensitively, in e-mail order', async () => {
    expect(await search(shop, 'ad')).toEqual([['email_prefix', '1001'], ['email_prefix', '1002']]);
    expect(await search(shop, 'ADA.')).toEqual([['email_prefix', '1001']]);
    expect(await search(shop, 'adam@example.com')).toEqual([['email_prefix', '1002']]);
    expect(await search(shop, 'nobody')).toEqual([]);
  });

  it('finds by the shop\'s customer id, exactly, before e-mails', async () => {
    expect(await search(shop, '1002')).toEqual([['shop_customer_id', '1002']]);
    expect(await search(shop, '100')).toEqual([]);
    // Found by id and by e-mail prefix ("ada" starts "ada.lovelace@…"): the id's hit first, each customer once.
    expect(await search(shop, 'ada')).toEqual([['shop_customer_id', 'ada'], ['email_prefix', '1001'], ['email_prefix', '1002']]);
  });

  it('finds by a discount code, exactly, as issued or typed in lower case', async () => {
    expect(await search(shop, code)).toEqual([['discount_code', '1003']]);
    expect(await search(shop, code.toLowerCase())).toEqual([['discount_code', '1003']]);
    expect(await search(shop, code.slice(0, -1))).toEqual([]);
  });

  it('never finds another shop\'s customer, by any way', async () => {
    expect(await search(other, code)).toEqual([]);
    expect(await search(other, '1001')).toEqual([]);
    expect(await search(other, 'ada')).toEqual([['email_prefix', '9001']]);
    expect(await search(shop, 'bob')).toEqual([['email_prefix', '1003']]);
    expect(await search(shop, '9001')).toEqual([]);
  });

  it('gives at most `first`, exact matches kept first', async () => {
    expect(await search(shop, 'ada', 1)).toEqual([['shop_customer_id', 'ada']]);
    expect(await search(shop, 'ada', 2)).toEqual([['shop_customer_id', 'ada'], ['email_prefix', '1001']]);
    expect(await search(shop, 'ad', 1)).toEqual([['email_prefix', '1001']]);
  });

  it.each([
    ['an empty query', '', undefined],
    ['a blank query', '   ', undefined],
    ['first 0', 'a', 0],
    ['first over 50', 'a', 51],
  ])('refuses %s as a validation error', async (_name, query, first) => {
    const res = await t.graphql(shop.apiKey, SEARCH, { query, first });
    expect(res.data).toBeNull();
    expect(res.errors[0].extensions.code).toBe('validation_error');
  });

  it('is the admin API\'s: not on the storefront schema, and refused without a valid key', async () => {
    expect(printSchemaSDL('storefront')).not.toContain('customerSearch');
    const res = await t.graphql('lk_not_a_key', SEARCH, { query: 'ada' });
    expect(res.errors[0].extensions.code).toBe('unauthorized');
  });
});
