import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inTransaction } from '../src/db/transaction.js';
import { ensureDemoShop } from '../src/demo.js';
import { READABLE_ALPHABET } from '../src/domain/kernel/ids.js';
import { DISCOUNT_CODE_RANDOM_LENGTH, issueDiscountCode } from '../src/domain/codes/discount-codes.js';
import { createPointsRedemption } from '../src/domain/rewards/redemptions.js';
import { onPostgres, startTestApp, type TestApp } from './helpers.js';

let t: TestApp;
let shop: { shopId: string; apiKey: string };
let other: { shopId: string; apiKey: string };

beforeAll(async () => {
  t = await startTestApp();
  shop = await t.shop();
  other = await t.shop('Other shop');
});
afterAll(() => t?.stop());

const CONTRACT_FIELDS = [
  '_id', 'redeemable', 'status', 'name', 'type', 'discountPrefix', 'exchangeType', 'rewardValue', 'discountValue',
  'purchaseType', 'applyProductOption', 'applyProducts', 'applyCollections', 'applyVariants', 'minimumRequirementType',
  'combinations', 'expireDateType', 'sortIndex', 'createdAt', 'updatedAt',
];
// What the contract's enumerations need beyond the fields it lists.
const EXTRA_FIELDS = ['minimumRequirementValue', 'expireDays', 'expireDate'];
const CODE_PATTERN = (prefix: string) => new RegExp(`^${prefix}[${READABLE_ALPHABET}]{${DISCOUNT_CODE_RANDOM_LENGTH}}$`);

const db = () => t.app.database.db;

async function option(input: Record<string, unknown>, shopId = shop.shopId) {
  return (await createPointsRedemption(db(), shopId, input)).pointsRedemption;
}

function get(path: string, query: Record<string, string | number>, apiKey: string | null = shop.apiKey) {
  const qs = new URLSearchParams(Object.entries(query).map(([k, v]) => [k, String(v)]));
  return fetch(`${t.url}/rest-api/v1${path}?${qs}`, { headers: apiKey ? { authorization: `Bearer ${apiKey}` } : {} });
}

const redeem = (body: unknown, apiKey = shop.apiKey, headers?: Record<string, string>) =>
  t.post('/rest-api/v1/pointsRedemptions', body, apiKey, headers);

async function customerRow(shopifyCustomerId: string, shopId = shop.shopId) {
  return db()
    .selectFrom('customers')
    .selectAll()
    .where('shop_id', '=', shopId)
    .where('shopify_customer_id', '=', shopifyCustomerId)
    .executeTakeFirstOrThrow();
}

/** Balance, last ledger entry, the ledger's sum of deltas and whether each entry starts where the last ended. */
async function ledgerOf(shopifyCustomerId: string) {
  const customer = await customerRow(shopifyCustomerId);
  const entries = await db().selectFrom('activities').selectAll().where('customer_id', '=', customer.id).orderBy('seq').execute();
  return {
    customer,
    entries,
    balance: customer.points,
    last: entries.at(-1)?.new_points,
    sum: entries.reduce((s, e) => s + (e.new_points - e.old_points), 0),
    chained: entries.every((e, i) => i === 0 || e.old_points === entries[i - 1]!.new_points),
  };
}

describe('redemption options through GraphQL', () => {
  const CREATE = `mutation($input: PointsRedemptionInput!) {
    pointsRedemptionCreate(input: $input) {
      pointsRedemption { _id redeemable status name type discountPrefix exchangeType rewardValue discountValue purchaseType
        applyProductOption applyProducts applyCollections applyVariants minimumRequirementType minimumRequirementValue
        combinations expireDateType expireDays expireDate sortIndex createdAt updatedAt }
      userErrors { code field message }
    }
  }`;

  it('creates with defaults, updates some fields, deletes; codes survive their option', async () => {
    const s = await t.shop('CRUD shop');
    const created = await t.graphql(s.apiKey, CREATE, {
      input: { name: '$5 off', type: 'amount', discountPrefix: 'FIVE-', rewardValue: 500, discountValue: 5 },
    });
    expect(created.errors).toBeUndefined();
    const { pointsRedemption: p, userErrors } = created.data.pointsRedemptionCreate;
    expect(userErrors).toEqual([]);
    expect(p).toMatchObject({
      status: true, name: '$5 off', type: 'amount', discountPrefix: 'FIVE-', exchangeType: 'fixed', rewardValue: 500,
      discountValue: 5, purchaseType: 'one_time', applyProductOption: 'all', applyProducts: [], applyCollections: [],
      applyVariants: [], minimumRequirementType: 'none', minimumRequirementValue: null, combinations: [],
      expireDateType: 'none', expireDays: null, expireDate: null, sortIndex: 0, redeemable: false,
    });
    expect(p._id).toMatch(/^[0-9a-f]{24}$/);

    const second = await t.graphql(s.apiKey, CREATE, { input: { name: 'Ship', type: 'shipping', discountPrefix: 'S-', rewardValue: 10 } });
    expect(second.data.pointsRedemptionCreate.pointsRedemption.sortIndex).toBe(1);

    const UPDATE = `mutation($input: PointsRedemptionUpdateInput!) {
      pointsRedemptionUpdate(input: $input) {
        pointsRedemption { _id name discountValue minimumRequirementType minimumRequirementValue combinations status updatedAt }
        userErrors { code field message }
      }
    }`;
    const updated = await t.graphql(s.apiKey, UPDATE, {
      input: { id: p._id, discountValue: 7.5, minimumRequirementType: 'purchase_amount', minimumRequirementValue: 50, combinations: ['order_discounts', 'order_discounts'], status: false },
    });
    expect(updated.data.pointsRedemptionUpdate).toMatchObject({
      pointsRedemption: { _id: p._id, name: '$5 off', discountValue: 7.5, minimumRequirementValue: 50, combinations: ['order_discounts'], status: false },
      userErrors: [],
    });

    // The merged result must pass the create rules: variable exchange is for amount discounts only.
    const bad = await t.graphql(s.apiKey, UPDATE, { input: { id: p._id, type: 'percentage', exchangeType: 'variable' } });
    expect(bad.data.pointsRedemptionUpdate.pointsRedemption).toBeNull();
    expect(bad.data.pointsRedemptionUpdate.userErrors[0]).toMatchObject({ code: 'validation_error', field: ['input', 'exchangeType'] });
    // Going back to no minimum drops the value that no longer means anything.
    const none = await t.graphql(s.apiKey, UPDATE, { input: { id: p._id, minimumRequirementType: 'none' } });
    expect(none.data.pointsRedemptionUpdate.pointsRedemption.minimumRequirementValue).toBeNull();

    // A missing option names the id the mutation was given, under input.
    const ghost = await t.graphql(s.apiKey, UPDATE, { input: { id: '0123456789abcdef01234567', name: 'x' } });
    expect(ghost.data.pointsRedemptionUpdate.userErrors).toEqual([
      { code: 'reward_not_found', field: ['input', 'id'], message: 'no points redemption with id 0123456789abcdef01234567' },
    ]);

    // Every delete takes its id in input and answers deleted<Resource>Id, as webhookSubscriptionDelete does.
    const DELETE = `mutation($input: PointsRedemptionDeleteInput!) {
      pointsRedemptionDelete(input: $input) { deletedPointsRedemptionId userErrors { code field } }
    }`;
    const deleted = await t.graphql(s.apiKey, DELETE, { input: { id: p._id } });
    expect(deleted.data.pointsRedemptionDelete).toEqual({ deletedPointsRedemptionId: p._id, userErrors: [] });
    const again = await t.graphql(s.apiKey, DELETE, { input: { id: p._id } });
    expect(again.data.pointsRedemptionDelete).toEqual({
      deletedPointsRedemptionId: null,
      userErrors: [{ code: 'reward_not_found', field: ['input', 'id'] }],
    });
    const malformed = await t.graphql(s.apiKey, DELETE, { input: { id: 'nope' } });
    expect(malformed.data.pointsRedemptionDelete.userErrors).toEqual([{ code: 'validation_error', field: ['input', 'id'] }]);
    // Another shop's option is as good as missing.
    const foreign = await t.graphql(shop.apiKey, DELETE, { input: { id: second.data.pointsRedemptionCreate.pointsRedemption._id } });
    expect(foreign.data.pointsRedemptionDelete.userErrors[0].code).toBe('reward_not_found');
  });

  it('leaves inputs the GraphQL types already refuse to GraphQL', async () => {
    for (const input of [{ type: 'amount', rewardValue: 1, discountValue: 1 }, { name: 'x', type: 'cash', rewardValue: 1 }]) {
      const res = await t.graphql(shop.apiKey, CREATE, { input });
      expect(res.errors.length).toBeGreaterThan(0);
      expect(res.data).toBeUndefined();
    }
  });

  const badInputs: Array<[string, Record<string, unknown>]> = [
    ['zero rewardValue', { name: 'x', type: 'amount', rewardValue: 0, discountValue: 1 }],
    ['amount without a discount', { name: 'x', type: 'amount', rewardValue: 1 }],
    ['percentage over 100', { name: 'x', type: 'percentage', rewardValue: 1, discountValue: 101 }],
    ['three decimals', { name: 'x', type: 'amount', rewardValue: 1, discountValue: 1.005 }],
    ['variable percentage', { name: 'x', type: 'percentage', exchangeType: 'variable', rewardValue: 1, discountValue: 5 }],
    ['collections without any', { name: 'x', type: 'amount', rewardValue: 1, discountValue: 1, applyProductOption: 'collections' }],
    ['minimum without a value', { name: 'x', type: 'amount', rewardValue: 1, discountValue: 1, minimumRequirementType: 'purchase_amount' }],
    ['fractional quantity', { name: 'x', type: 'amount', rewardValue: 1, discountValue: 1, minimumRequirementType: 'quantity', minimumRequirementValue: 1.5 }],
    ['days without a number', { name: 'x', type: 'amount', rewardValue: 1, discountValue: 1, expireDateType: 'days' }],
    ['prefix with a space', { name: 'x', type: 'amount', rewardValue: 1, discountValue: 1, discountPrefix: 'A B' }],
  ];
  it.each(badInputs)('refuses %s with validation_error', async (_name, input) => {
    const res = await t.graphql(shop.apiKey, CREATE, { input });
    // The domain's zod schema refuses it: a userError carrying the REST code and the path of the field.
    expect(res.errors).toBeUndefined();
    expect(res.data.pointsRedemptionCreate.pointsRedemption).toBeNull();
    const [first] = res.data.pointsRedemptionCreate.userErrors;
    expect(first.code).toBe('validation_error');
    expect(first.field[0]).toBe('input');
    expect(first.field.length).toBeGreaterThan(1);
  });
});

describe('GET /pointsRedemptions', () => {
  let shopB: { shopId: string; apiKey: string };
  const ids: string[] = [];

  beforeAll(async () => {
    shopB = await t.shop('List shop');
    await t.customer(shopB.shopId, 'l-rich', 1000);
    await t.customer(shopB.shopId, 'l-poor', 150);
    // Created out of order: the list follows sortIndex, not creation.
    const specs = [
      { name: 'C', sortIndex: 2, rewardValue: 300 },
      { name: 'A', sortIndex: 0, rewardValue: 100 },
      { name: 'E', sortIndex: 4, rewardValue: 100, status: false },
      { name: 'B', sortIndex: 1, rewardValue: 200, exchangeType: 'variable' },
      { name: 'D', sortIndex: 3, rewardValue: 100, expireDateType: 'date', expireDate: new Date(Date.now() - 1000) },
    ];
    for (const spec of specs) {
      const o = await option({ type: 'amount', discountPrefix: 'L-', discountValue: 1, ...spec }, shopB.shopId);
      ids[spec.sortIndex] = o._id;
    }
  });

  it('returns the contract shape in sortIndex order', async () => {
    const res = await get('/pointsRedemptions', { customerIdentifier: 'l-rich', page: 1, pageSize: 10 }, shopB.apiKey);
    expect(res.status).toBe(200);
    const body = await res.json();
    expect(Object.keys(body).sort()).toEqual(['message', 'pointsRedemptions', 'success']);
    expect(body.success).toBe(true);
    expect(typeof body.message).toBe('string');
    expect(body.pointsRedemptions.map((p: { name: string }) => p.name)).toEqual(['A', 'B', 'C', 'D', 'E']);
    expect(body.pointsRedemptions.map((p: { _id: string }) => p._id)).toEqual(ids);
    for (const record of body.pointsRedemptions) {
      expect(Object.keys(record).sort()).toEqual([...CONTRACT_FIELDS, ...EXTRA_FIELDS].sort());
      expect(record.createdAt).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    }
  });

  it('flags redeemable by balance, status and expiry', async () => {
    const flags = async (customerIdentifier: string) => {
      const body = await (await get('/pointsRedemptions', { customerIdentifier, page: 1, pageSize: 10 }, shopB.apiKey)).json();
      return Object.fromEntries(body.pointsRedemptions.map((p: { name: string; redeemable: boolean }) => [p.name, p.redeemable]));
    };
    // A: 100 active; B: 200 per step; C: 300; D: expired; E: inactive.
    expect(await flags('l-rich')).toEqual({ A: true, B: true, C: true, D: false, E: false });
    expect(await flags('l-poor')).toEqual({ A: true, B: false, C: false, D: false, E: false });
    expect(await flags('L-POOR@example.com')).toEqual({ A: true, B: false, C: false, D: false, E: false });
    // A balance exactly at the cost is enough.
    await t.customer(shopB.shopId, 'l-poor', 200);
    expect((await flags('l-poor')).B).toBe(true);
  });

  it('pages: full pages, the last partial page, and an empty page past the end', async () => {
    const names = async (page: number, pageSize: number) =>
      (await (await get('/pointsRedemptions', { customerIdentifier: 'l-rich', page, pageSize }, shopB.apiKey)).json()).pointsRedemptions.map(
        (p: { name: string }) => p.name,
      );
    expect(await names(1, 2)).toEqual(['A', 'B']);
    expect(await names(2, 2)).toEqual(['C', 'D']);
    expect(await names(3, 2)).toEqual(['E']);
    expect(await names(4, 2)).toEqual([]);
    expect(await names(1000, 250)).toEqual([]);
    expect(await names(1, 5)).toHaveLength(5);
    expect(await names(1, 250)).toHaveLength(5);
  });

  const badQueries: Array<[string, Record<string, string | number>]> = [
    ['missing customerIdentifier', { page: 1, pageSize: 10 }],
    ['empty customerIdentifier', { customerIdentifier: ' ', page: 1, pageSize: 10 }],
    ['missing page', { customerIdentifier: 'l-rich', pageSize: 10 }],
    ['missing pageSize', { customerIdentifier: 'l-rich', page: 1 }],
    ['page 0', { customerIdentifier: 'l-rich', page: 0, pageSize: 10 }],
    ['negative page', { customerIdentifier: 'l-rich', page: -1, pageSize: 10 }],
    ['pageSize 0', { customerIdentifier: 'l-rich', page: 1, pageSize: 0 }],
    ['pageSize 251', { customerIdentifier: 'l-rich', page: 1, pageSize: 251 }],
    ['fractional page', { customerIdentifier: 'l-rich', page: '1.5', pageSize: 10 }],
    ['page not a number', { customerIdentifier: 'l-rich', page: 'one', pageSize: 10 }],
    ['exponent page', { customerIdentifier: 'l-rich', page: '1e3', pageSize: 10 }],
    ['huge page', { customerIdentifier: 'l-rich', page: '99999999999999999999', pageSize: 10 }],
  ];
  it.each(badQueries)('answers %s with 400 validation_error', async (_name, query) => {
    const res = await get('/pointsRedemptions', query, shopB.apiKey);
    expect(res.status).toBe(400);
    expect(await res.json()).toMatchObject({ success: false, statusCode: 400, error: 'validation_error' });
  });

  it('answers a repeated page parameter with 400', async () => {
    const res = await fetch(`${t.url}/rest-api/v1/pointsRedemptions?customerIdentifier=l-rich&page=1&page=2&pageSize=5`, {
      headers: { authorization: `Bearer ${shopB.apiKey}` },
    });
    expect(res.status).toBe(400);
  });

  it('answers 404 for an unknown customer or another shop\'s, 401 without a key', async () => {
    const unknown = await get('/pointsRedemptions', { customerIdentifier: 'nobody', page: 1, pageSize: 10 }, shopB.apiKey);
    expect(unknown.status).toBe(404);
    expect(await unknown.json()).toMatchObject({ success: false, statusCode: 404, error: 'customer_not_found' });
    const foreign = await get('/pointsRedemptions', { customerIdentifier: 'l-rich', page: 1, pageSize: 10 }, other.apiKey);
    expect(foreign.status).toBe(404);
    const anonymous = await get('/pointsRedemptions', { customerIdentifier: 'l-rich', page: 1, pageSize: 10 }, null);
    expect(anonymous.status).toBe(401);
    expect(anonymous.headers.get('www-authenticate')).toBe('Bearer');
  });

  it('GraphQL pointsRedemptions pages with cursors and the same flags', async () => {
    const Q = `query($c: String, $after: String) {
      pointsRedemptions(customerIdentifier: $c, first: 2, after: $after) {
        edges { cursor node { _id name redeemable sortIndex } }
        pageInfo { hasNextPage endCursor }
      }
    }`;
    const seen: Array<{ name: string; redeemable: boolean }> = [];
    let after: string | null = null;
    for (let i = 0; i < 5; i++) {
      const res: any = await t.graphql(shopB.apiKey, Q, { c: 'l-rich', after });
      expect(res.errors).toBeUndefined();
      const conn = res.data.pointsRedemptions;
      seen.push(...conn.edges.map((e: { node: { name: string; redeemable: boolean } }) => e.node));
      if (!conn.pageInfo.hasNextPage) break;
      after = conn.pageInfo.endCursor;
    }
    expect(seen.map((n) => `${n.name}:${n.redeemable}`)).toEqual(['A:true', 'B:true', 'C:true', 'D:false', 'E:false']);
    // Without a customer nothing is redeemable; an unknown one is customer_not_found.
    const anonymous = await t.graphql(shopB.apiKey, Q, {});
    expect(anonymous.data.pointsRedemptions.edges.every((e: { node: { redeemable: boolean } }) => !e.node.redeemable)).toBe(true);
    const unknown = await t.graphql(shopB.apiKey, Q, { c: 'nobody' });
    expect(unknown.errors[0].extensions.code).toBe('customer_not_found');
    const badCursor = await t.graphql(shopB.apiKey, Q, { c: 'l-rich', after: 'garbage' });
    expect(badCursor.errors[0].extensions.code).toBe('validation_error');
  });
});

describe('POST /pointsRedemptions', () => {
  let fixed: { _id: string };
  let variable: { _id: string };
  let tote: { _id: string };
  let inactive: { _id: string };

  beforeAll(async () => {
    fixed = await option({ name: '$5 off', type: 'amount', discountPrefix: 'FIVE-', rewardValue: 100, discountValue: 5, expireDateType: 'days', expireDays: 30 });
    variable = await option({ name: 'Steps', type: 'amount', exchangeType: 'variable', discountPrefix: 'STEP-', rewardValue: 100, discountValue: 1.5 });
    tote = await option({ name: 'Tote', type: 'free_product', discountPrefix: 'TOTE-', rewardValue: 50, applyProductOption: 'products', applyVariants: ['v-1', 'v-2'] });
    inactive = await option({ name: 'Off', type: 'amount', discountPrefix: 'OFF-', rewardValue: 10, discountValue: 1, status: false });
    await t.customer(shop.shopId, 'r-1', 1000);
  });

  it('redeems: contract response, code format, ledger entry, code row and outbox event in one go', async () => {
    const res = await redeem({ customerIdentifier: 'r-1', pointsAmount: 100, rewardId: fixed._id, currencyActive: 'eur' });
    expect(res.status).toBe(200);
    const body = await res.json();
    expect(Object.keys(body).sort()).toEqual(['discountCode', 'message', 'success']);
    expect(body.success).toBe(true);
    expect(body.discountCode).toMatch(CODE_PATTERN('FIVE-'));

    const ledger = await ledgerOf('r-1');
    expect(ledger.balance).toBe(900);
    const entry = ledger.entries.at(-1)!;
    expect(entry).toMatchObject({ type: 'redeem_points', setting_type: 'redemption', old_points: 1000, new_points: 900 });

    const code = await db().selectFrom('discount_codes').selectAll().where('code', '=', body.discountCode).executeTakeFirstOrThrow();
    expect(code).toMatchObject({ shop_id: shop.shopId, customer_id: ledger.customer.id, reward_id: fixed._id, activity_id: entry.id, type: 'amount', currency: 'EUR', variant_id: null, points_amount: 100 });
    expect(Number(code.value)).toBe(5);
    expect(code.expires_at!.getTime() - code.created_at.getTime()).toBe(30 * 86_400_000);

    const events = await db().selectFrom('outbox_events').selectAll().where('shop_id', '=', shop.shopId).where('type', '=', 'redemptions/created').execute();
    const event = events.find((e) => (e.data as { code: string }).code === body.discountCode);
    expect(event?.data).toMatchObject({ code: body.discountCode, value: 5, type: 'amount', currency: 'EUR', reward: fixed._id, customer: ledger.customer.id, activity: entry.id, pointsAmount: 100 });
    // The redemption's event is the one: no points/subtracted event for the same ledger entry.
    const pointsEvents = await db().selectFrom('outbox_events').select('data').where('shop_id', '=', shop.shopId).where('type', 'like', 'points/%').execute();
    expect(pointsEvents.some((e) => (e.data as { _id: string })._id === entry.id)).toBe(false);
  });

  it('computes variable exchanges in steps, exactly to the cent', async () => {
    await t.customer(shop.shopId, 'r-var', 1100);
    for (const [points, value] of [[100, 1.5], [300, 4.5], [700, 10.5]] as const) {
      const body = await (await redeem({ customerIdentifier: 'r-var', pointsAmount: points, rewardId: variable._id })).json();
      expect(body.discountCode).toMatch(CODE_PATTERN('STEP-'));
      const row = await db().selectFrom('discount_codes').select(['value', 'points_amount']).where('code', '=', body.discountCode).executeTakeFirstOrThrow();
      expect(Number(row.value)).toBe(value);
      expect(row.points_amount).toBe(points);
    }
    expect((await ledgerOf('r-var')).balance).toBe(0);
    // Not a multiple of the step, or zero steps: 400.
    await t.customer(shop.shopId, 'r-var', 1000);
    for (const pointsAmount of [150, 50]) {
      const res = await redeem({ customerIdentifier: 'r-var', pointsAmount, rewardId: variable._id });
      expect(res.status).toBe(400);
      expect(await res.json()).toMatchObject({ error: 'validation_error', details: [{ path: 'pointsAmount' }] });
    }
    // 0.1 × 3 steps is 0.30, not 0.30000000000000004.
    const dime = await option({ name: 'Dime', type: 'amount', exchangeType: 'variable', discountPrefix: 'DIME-', rewardValue: 10, discountValue: 0.1 });
    const body = await (await redeem({ customerIdentifier: 'r-var', pointsAmount: 30, rewardId: dime._id })).json();
    const row = await db().selectFrom('discount_codes').select('value').where('code', '=', body.discountCode).executeTakeFirstOrThrow();
    expect(Number(row.value)).toBe(0.3);
  });

  it('free_product needs a variantId it offers; other types ignore it', async () => {
    await t.customer(shop.shopId, 'r-tote', 500);
    const without = await redeem({ customerIdentifier: 'r-tote', pointsAmount: 50, rewardId: tote._id });
    expect(without.status).toBe(400);
    expect(await without.json()).toMatchObject({ error: 'validation_error', details: [{ path: 'variantId' }] });
    const wrong = await redeem({ customerIdentifier: 'r-tote', pointsAmount: 50, rewardId: tote._id, variantId: 'v-9' });
    expect(wrong.status).toBe(422);
    expect((await wrong.json()).error).toBe('variant_not_eligible');
    expect((await ledgerOf('r-tote')).balance).toBe(500);

    const ok = await (await redeem({ customerIdentifier: 'r-tote', pointsAmount: 50, rewardId: tote._id, variantId: 'v-2' })).json();
    expect(ok.discountCode).toMatch(CODE_PATTERN('TOTE-'));
    const row = await db().selectFrom('discount_codes').selectAll().where('code', '=', ok.discountCode).executeTakeFirstOrThrow();
    expect(row).toMatchObject({ type: 'free_product', variant_id: 'v-2' });

    const amount = await (await redeem({ customerIdentifier: 'r-tote', pointsAmount: 100, rewardId: fixed._id, variantId: 'v-2' })).json();
    const amountRow = await db().selectFrom('discount_codes').selectAll().where('code', '=', amount.discountCode).executeTakeFirstOrThrow();
    expect(amountRow.variant_id).toBeNull();
    expect((await ledgerOf('r-tote')).balance).toBe(350);
  });

  it('answers every refusal with its status and code, and changes nothing', async () => {
    await t.customer(shop.shopId, 'r-err', 60);
    const otherOption = await option({ name: 'Theirs', type: 'amount', discountPrefix: 'X-', rewardValue: 10, discountValue: 1 }, other.shopId);
    const expired = await option({ name: 'Gone', type: 'amount', discountPrefix: 'G-', rewardValue: 10, discountValue: 1, expireDateType: 'date', expireDate: '2020-01-01T00:00:00Z' });
    const cases: Array<[unknown, number, string]> = [
      [{ customerIdentifier: 'r-err', pointsAmount: 10, rewardId: expired._id }, 422, 'reward_expired'],
      [{ customerIdentifier: 'r-err', pointsAmount: 100, rewardId: fixed._id }, 422, 'insufficient_points'],
      [{ customerIdentifier: 'r-err', pointsAmount: 10, rewardId: inactive._id }, 422, 'reward_inactive'],
      [{ customerIdentifier: 'r-err', pointsAmount: 10, rewardId: '0123456789abcdef01234567' }, 404, 'reward_not_found'],
      [{ customerIdentifier: 'r-err', pointsAmount: 10, rewardId: otherOption._id }, 404, 'reward_not_found'],
      [{ customerIdentifier: 'nobody', pointsAmount: 100, rewardId: fixed._id }, 404, 'customer_not_found'],
      [{ customerIdentifier: 'r-err', pointsAmount: 50, rewardId: fixed._id }, 400, 'validation_error'],
    ];
    for (const [body, status, error] of cases) {
      const res = await redeem(body);
      expect(res.status, JSON.stringify(body)).toBe(status);
      expect(await res.json()).toMatchObject({ success: false, statusCode: status, error });
    }
    const ledger = await ledgerOf('r-err');
    expect(ledger.balance).toBe(60);
    expect(ledger.entries.filter((e) => e.type === 'redeem_points')).toHaveLength(0);
    const anonymous = await redeem({ customerIdentifier: 'r-err', pointsAmount: 100, rewardId: fixed._id }, '');
    expect(anonymous.status).toBe(401);
  });

  const badBodies: Array<[string, unknown]> = [
    ['missing pointsAmount', { customerIdentifier: 'r-1', rewardId: 'x' }],
    ['missing rewardId', { customerIdentifier: 'r-1', pointsAmount: 100 }],
    ['missing customerIdentifier', { pointsAmount: 100, rewardId: '0123456789abcdef01234567' }],
    ['zero pointsAmount', { customerIdentifier: 'r-1', pointsAmount: 0, rewardId: '0123456789abcdef01234567' }],
    ['negative pointsAmount', { customerIdentifier: 'r-1', pointsAmount: -100, rewardId: '0123456789abcdef01234567' }],
    ['fractional pointsAmount', { customerIdentifier: 'r-1', pointsAmount: 99.5, rewardId: '0123456789abcdef01234567' }],
    ['string pointsAmount', { customerIdentifier: 'r-1', pointsAmount: '100', rewardId: '0123456789abcdef01234567' }],
    ['huge pointsAmount', { customerIdentifier: 'r-1', pointsAmount: 1e20, rewardId: '0123456789abcdef01234567' }],
    ['malformed rewardId', { customerIdentifier: 'r-1', pointsAmount: 100, rewardId: 'not-an-id' }],
    ['numeric rewardId', { customerIdentifier: 'r-1', pointsAmount: 100, rewardId: 42 }],
    ['bad currency', { customerIdentifier: 'r-1', pointsAmount: 100, rewardId: '0123456789abcdef01234567', currencyActive: 'euro' }],
    ['variantId wrong type', { customerIdentifier: 'r-1', pointsAmount: 100, rewardId: '0123456789abcdef01234567', variantId: 7 }],
    ['unknown field', { customerIdentifier: 'r-1', pointsAmount: 100, rewardId: '0123456789abcdef01234567', points: 1 }],
    ['array body', [{ customerIdentifier: 'r-1', pointsAmount: 100 }]],
    ['null body', null],
  ];
  it.each(badBodies)('rejects %s with 400 validation_error', async (_name, body) => {
    const res = await redeem(JSON.stringify(body));
    expect(res.status).toBe(400);
    const json = await res.json();
    expect(json).toMatchObject({ success: false, statusCode: 400, error: 'validation_error' });
    expect(Array.isArray(json.details)).toBe(true);
  });

  it('malformed JSON is 400', async () => {
    const res = await redeem('{"customerIdentifier": ');
    expect(res.status).toBe(400);
    expect((await res.json()).error).toBe('malformed_json');
  });

  it('a replay with the same Idempotency-Key returns the same code and spends once', async () => {
    await t.customer(shop.shopId, 'r-idem', 300);
    const body = { customerIdentifier: 'r-idem', pointsAmount: 100, rewardId: fixed._id };
    const first = await (await redeem(body, shop.apiKey, { 'idempotency-key': 'redeem-once' })).json();
    const second = await redeem(body, shop.apiKey, { 'idempotency-key': 'redeem-once' });
    expect(second.headers.get('idempotent-replayed')).toBe('true');
    expect((await second.json()).discountCode).toBe(first.discountCode);
    expect((await ledgerOf('r-idem')).balance).toBe(200);
  });

  it(`10 parallel redemptions of 100 on 300: exactly 3 codes, balance 0, ledger consistent (${onPostgres ? 'PostgreSQL' : 'PGlite'})`, async () => {
    await t.customer(shop.shopId, 'r-race', 300);
    const responses = await Promise.all(
      Array.from({ length: 10 }, () => redeem({ customerIdentifier: 'r-race', pointsAmount: 100, rewardId: fixed._id })),
    );
    const bodies = await Promise.all(responses.map((r) => r.json()));
    const statuses = responses.map((r) => r.status).sort();
    expect(statuses).toEqual([200, 200, 200, 422, 422, 422, 422, 422, 422, 422]);
    expect(bodies.filter((b) => !b.success).every((b) => b.error === 'insufficient_points')).toBe(true);
    const codes = bodies.filter((b) => b.success).map((b) => b.discountCode as string);
    expect(new Set(codes).size).toBe(3);

    const ledger = await ledgerOf('r-race');
    expect(ledger.balance).toBe(0);
    expect(ledger.last).toBe(0);
    expect(ledger.sum).toBe(0);
    expect(ledger.chained).toBe(true);
    const redeems = ledger.entries.filter((e) => e.type === 'redeem_points');
    expect(redeems).toHaveLength(3);
    const rows = await db().selectFrom('discount_codes').selectAll().where('customer_id', '=', ledger.customer.id).execute();
    expect(rows.map((r) => r.code).sort()).toEqual([...codes].sort());
    expect(rows.map((r) => r.activity_id).sort()).toEqual(redeems.map((e) => e.id).sort());
  });

  it('draws another code when the random one is taken', async () => {
    const customer = await customerRow('r-1');
    const activity = await db().selectFrom('activities').select('id').where('customer_id', '=', customer.id).executeTakeFirstOrThrow();
    const taken = await db().selectFrom('discount_codes').select('code').where('shop_id', '=', shop.shopId).where('code', 'like', 'FIVE-%').executeTakeFirstOrThrow();
    const draws = [taken.code.slice('FIVE-'.length), 'ZZZZZZZZZZ'];
    const code = await inTransaction(db(), (trx) =>
      issueDiscountCode(
        trx,
        { prefix: 'FIVE-', shop_id: shop.shopId, customer_id: customer.id, reward_id: fixed._id, activity_id: activity.id, type: 'amount', value: 5, currency: null, variant_id: null, points_amount: 100, expires_at: null },
        () => draws.shift()!,
      ),
    );
    expect(code.code).toBe('FIVE-ZZZZZZZZZZ');
    expect(draws).toEqual([]);
  });
});

describe('customer.discountCodes', () => {
  it('lists a customer\'s codes newest first with cursors', async () => {
    const s = await t.shop('Codes shop');
    await t.customer(s.shopId, 'dc-1', 1000);
    const o = await option({ name: 'Ten', type: 'percentage', discountPrefix: 'TEN-', rewardValue: 100, discountValue: 10 }, s.shopId);
    const issued: string[] = [];
    for (let i = 0; i < 3; i++) {
      issued.push((await (await redeem({ customerIdentifier: 'dc-1', pointsAmount: 100, rewardId: o._id, currencyActive: 'usd' }, s.apiKey)).json()).discountCode);
    }
    const Q = `query($after: String) { customer(identifier: "dc-1") { discountCodes(first: 2, after: $after) {
      edges { node { _id code value type currency reward pointsAmount createdAt } } pageInfo { hasNextPage endCursor } } } }`;
    const page1 = (await t.graphql(s.apiKey, Q, {})).data.customer.discountCodes;
    expect(page1.edges.map((e: { node: { code: string } }) => e.node.code)).toEqual([issued[2], issued[1]]);
    expect(page1.edges[0].node).toMatchObject({ value: 10, type: 'percentage', currency: 'USD', reward: o._id, pointsAmount: 100 });
    expect(page1.pageInfo.hasNextPage).toBe(true);
    const page2 = (await t.graphql(s.apiKey, Q, { after: page1.pageInfo.endCursor })).data.customer.discountCodes;
    expect(page2.edges.map((e: { node: { code: string } }) => e.node.code)).toEqual([issued[0]]);
    expect(page2.pageInfo.hasNextPage).toBe(false);
  });
});

describe('demo shop', () => {
  it('gets redemption options and one referral', async () => {
    const fresh = await startTestApp();
    try {
      const demo = await ensureDemoShop(fresh.app.database.db);
      expect(demo).not.toBeNull();
      const list = await fetch(`${fresh.url}/rest-api/v1/pointsRedemptions?customerIdentifier=demo-1002&page=1&pageSize=50`, {
        headers: { authorization: `Bearer ${demo!.apiKey}` },
      });
      const body = await list.json();
      expect(body.pointsRedemptions.length).toBeGreaterThanOrEqual(3);
      expect(body.pointsRedemptions.some((p: { redeemable: boolean }) => p.redeemable)).toBe(true);
      const referees = await fetch(`${fresh.url}/rest-api/v1/referral/referee?customerIdentifier=demo-1001&page=1&pageSize=10`, {
        headers: { authorization: `Bearer ${demo!.apiKey}` },
      });
      expect((await referees.json()).data.map((r: { shopifyCustomerId: string }) => r.shopifyCustomerId)).toEqual(['demo-1003']);
    } finally {
      await fresh.stop();
    }
  });
});
