import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createPointsRedemption } from '../src/domain/rewards/redemptions.js';
import { startTestApp, type TestApp } from './helpers.js';

let t: TestApp;
let shop: { shopId: string; apiKey: string };
const rewards: Record<string, string> = {};

beforeAll(async () => {
  t = await startTestApp();
  shop = await t.shop();
  const db = t.app.database.db;
  const specs = {
    fixed: { name: '$5', type: 'amount', discountPrefix: 'P5-', rewardValue: 100, discountValue: 5 },
    variable: { name: 'Steps', type: 'amount', exchangeType: 'variable', discountPrefix: 'PV-', rewardValue: 50, discountValue: 0.75 },
    product: { name: 'Mug', type: 'free_product', discountPrefix: 'MUG-', rewardValue: 80, applyProductOption: 'products', applyVariants: ['mug-1'] },
    inactive: { name: 'Off', type: 'shipping', discountPrefix: 'NO-', rewardValue: 10, status: false },
  };
  for (const [key, spec] of Object.entries(specs)) {
    rewards[key] = (await createPointsRedemption(db, shop.shopId, spec)).pointsRedemption._id;
  }
  // Twin customers: REST spends one's points, GraphQL the other's.
  await t.customer(shop.shopId, 'twin-rest', 500);
  await t.customer(shop.shopId, 'twin-gql', 500);
});
afterAll(() => t?.stop());

const REDEEM = `mutation($input: PointsRedeemInput!) {
  pointsRedeem(input: $input) {
    discountCode { code value type currency variantId reward pointsAmount customer activity }
    activity { _id type settingType oldPoints newPoints }
    customer { points }
    userErrors { code field message }
  }
}`;

/** The same redemption through both faces, each on its twin customer. */
async function both(input: Record<string, unknown>) {
  const res = await t.post('/rest-api/v1/pointsRedemptions', { ...input, customerIdentifier: 'twin-rest' }, shop.apiKey);
  const rest = { status: res.status, body: await res.json() };
  const gql = await t.graphql(shop.apiKey, REDEEM, { input: { ...input, customerIdentifier: 'twin-gql' } });
  // A malformed input fails argument validation (a GraphQL error); a refusal is a userError.
  const gqlCode: string | undefined = gql.data?.pointsRedeem?.userErrors?.[0]?.code ?? gql.errors?.[0]?.extensions?.code;
  return { rest, gql: gql.data?.pointsRedeem, gqlCode };
}

async function codeRow(code: string) {
  return t.app.database.db.selectFrom('discount_codes').selectAll().where('code', '=', code).executeTakeFirstOrThrow();
}

describe('pointsRedeem (GraphQL) and POST /pointsRedemptions (REST) give the same results', () => {
  const successes: Array<[string, Record<string, unknown>]> = [
    ['fixed', { rewardKey: 'fixed', pointsAmount: 100, currencyActive: 'gbp' }],
    ['variable', { rewardKey: 'variable', pointsAmount: 150 }],
    ['free_product', { rewardKey: 'product', pointsAmount: 80, variantId: 'mug-1' }],
  ];
  it.each(successes)('%s', async (_name, { rewardKey, ...input }) => {
    const { rest, gql } = await both({ ...input, rewardId: rewards[rewardKey as string] });
    expect(rest.status).toBe(200);
    expect(gql.userErrors).toEqual([]);
    const restRow = await codeRow(rest.body.discountCode);
    const gqlCode = gql.discountCode;
    const prefix = (code: string) => code.slice(0, code.length - 10);
    expect(prefix(gqlCode.code)).toBe(prefix(rest.body.discountCode));
    expect(gqlCode.code).toHaveLength(rest.body.discountCode.length);
    expect(gqlCode.code).not.toBe(rest.body.discountCode);
    expect({ value: gqlCode.value, type: gqlCode.type, currency: gqlCode.currency, variantId: gqlCode.variantId, reward: gqlCode.reward, pointsAmount: gqlCode.pointsAmount }).toEqual({
      value: Number(restRow.value), type: restRow.type, currency: restRow.currency, variantId: restRow.variant_id, reward: restRow.reward_id, pointsAmount: restRow.points_amount,
    });
    expect(gql.activity).toMatchObject({ type: 'redeem_points', settingType: 'redemption', oldPoints: gql.activity.newPoints + (input.pointsAmount as number) });
    // The twins spent the same, so their balances stay equal.
    const restCustomer = await t.app.database.db.selectFrom('customers').select('points').where('id', '=', restRow.customer_id).executeTakeFirstOrThrow();
    expect(gql.customer.points).toBe(restCustomer.points);
  });

  const refusals: Array<[string, Record<string, unknown>, number, string]> = [
    ['insufficient points', { rewardKey: 'variable', pointsAmount: 10_000 }, 422, 'insufficient_points'],
    ['inactive reward', { rewardKey: 'inactive', pointsAmount: 10 }, 422, 'reward_inactive'],
    ['unknown reward', { rewardId: 'aaaaaaaaaaaaaaaaaaaaaaaa', pointsAmount: 10 }, 404, 'reward_not_found'],
    ['wrong fixed amount', { rewardKey: 'fixed', pointsAmount: 99 }, 400, 'validation_error'],
    ['not a step multiple', { rewardKey: 'variable', pointsAmount: 75 }, 400, 'validation_error'],
    ['missing variant', { rewardKey: 'product', pointsAmount: 80 }, 400, 'validation_error'],
    ['variant not offered', { rewardKey: 'product', pointsAmount: 80, variantId: 'cup-9' }, 422, 'variant_not_eligible'],
    ['zero points', { rewardKey: 'fixed', pointsAmount: 0 }, 400, 'validation_error'],
    ['malformed reward id', { rewardId: 'xyz', pointsAmount: 100 }, 400, 'validation_error'],
    ['bad currency', { rewardKey: 'fixed', pointsAmount: 100, currencyActive: 'US' }, 400, 'validation_error'],
  ];
  it.each(refusals)('%s', async (_name, { rewardKey, ...input }, status, error) => {
    const rewardId = rewardKey ? rewards[rewardKey as string] : input.rewardId;
    const { rest, gql, gqlCode } = await both({ ...input, rewardId });
    expect(rest.status).toBe(status);
    expect(rest.body.error).toBe(error);
    expect(gqlCode).toBe(error);
    // Every refusal is a userError; invalid input gives one per field, as REST's `details`.
    const expected = rest.body.details
      ? rest.body.details.map((d: { path: string; message: string }) => ({ code: error, field: ['input', ...d.path.split('.')], message: d.message }))
      : [expect.objectContaining({ code: error, message: rest.body.message })];
    expect(gql.userErrors).toEqual(expected);
  });

  it('an unknown customer is customer_not_found on both', async () => {
    const res = await t.post('/rest-api/v1/pointsRedemptions', { customerIdentifier: 'ghost', pointsAmount: 100, rewardId: rewards.fixed }, shop.apiKey);
    const gql = await t.graphql(shop.apiKey, REDEEM, { input: { customerIdentifier: 'ghost', pointsAmount: 100, rewardId: rewards.fixed } });
    expect(res.status).toBe(404);
    expect(gql.data.pointsRedeem.userErrors).toEqual([{ code: 'customer_not_found', field: ['input', 'customerIdentifier'], message: (await res.json()).message }]);
  });
});
