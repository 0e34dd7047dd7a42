import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { shopPeriods } from '../src/domain/kernel/calendar.js';
import { birthdaysOn } from '../src/domain/program/birthday-run.js';
import { reportAction } from '../src/domain/program/rule-awards.js';
import { updateShopSettings } from '../src/domain/settings/shop-settings.js';
import { startTestApp, type TestApp } from './helpers.js';

let t: TestApp;
const db = () => t.app.database.db;

const createRule = async (apiKey: string, input: Record<string, unknown>) => {
  const res = await t.graphql(apiKey, 'mutation($input: EarningRuleCreateInput!) { earningRuleCreate(input: $input) { earningRule { _id } userErrors { message } } }', { input });
  expect(res.data.earningRuleCreate.userErrors).toEqual([]);
  return res.data.earningRuleCreate.earningRule._id as string;
};
const report = (apiKey: string, body: unknown) => t.post('/rest-api/v1/actions', body, apiKey);

async function ledgerOf(shopId: string, shopifyCustomerId: string) {
  const c = await db().selectFrom('customers').selectAll().where('shop_id', '=', shopId).where('shopify_customer_id', '=', shopifyCustomerId).executeTakeFirstOrThrow();
  const entries = await db().selectFrom('activities').select(['type', 'setting_type', 'old_points', 'new_points']).where('customer_id', '=', c.id).orderBy('seq').execute();
  // The ledger is a chain ending at the balance.
  entries.forEach((a, i) => expect(a.old_points).toBe(i === 0 ? 0 : entries[i - 1]!.new_points));
  expect(c.points).toBe(entries.at(-1)?.new_points ?? 0);
  return { points: c.points, entries };
}

beforeAll(async () => {
  t = await startTestApp();
});
afterAll(() => t?.stop());

describe('shop-local periods', () => {
  it.each([
    ['2026-11-24T03:30:00Z', 'UTC', '2026-11-24', '2026-W48'],
    ['2026-11-24T03:30:00Z', 'America/New_York', '2026-11-23', '2026-W48'],
    ['2026-11-23T04:30:00Z', 'America/New_York', '2026-11-22', '2026-W47'],
    ['2026-12-31T12:00:00Z', 'UTC', '2026-12-31', '2026-W53'],
    ['2027-01-01T12:00:00Z', 'UTC', '2027-01-01', '2026-W53'],
    ['2027-01-04T00:30:00Z', 'Asia/Tokyo', '2027-01-04', '2027-W01'],
    ['2024-12-30T12:00:00Z', 'Europe/Paris', '2024-12-30', '2025-W01'],
    ['2028-02-29T23:30:00Z', 'Europe/Paris', '2028-03-01', '2028-W09'],
  ])('%s in %s is %s, %s', (at, zone, day, week) => {
    expect(shopPeriods(new Date(at), zone)).toMatchObject({ day, week });
  });
});

describe('birthday rule', () => {
  it.each([
    ['1990-06-15', '2026-06-15', true],
    ['1990-06-15', '2026-06-14', false],
    ['1992-02-29', '2028-02-29', true],
    ['1992-02-29', '2027-02-28', true],
    ['1992-02-29', '2028-02-28', false],
    ['1992-02-29', '2027-03-01', false],
    ['2000-02-28', '2027-02-28', true],
    ['1990-12-31', '2026-12-31', true],
    ['1990-01-01', '2027-01-01', true],
  ])('born %s: %s is the birthday: %s', (birthday, day, expected) => {
    expect(birthdaysOn(day).includes(birthday.slice(5))).toBe(expected);
  });
  // The daily run that awards them: test/birthday-run.test.ts.
});

describe('sign-up rule', () => {
  it('awards a customer once, when created over GraphQL or by a referral sign-up; an update earns nothing', async () => {
    const shop = await t.shop('Sign-up shop');
    await createRule(shop.apiKey, { type: 'sign_up', name: 'Welcome', earnPoint: 100 });
    const upsert = 'mutation($input: CustomerInput!) { customerUpsert(input: $input) { customer { points } created } }';
    const created = await t.graphql(shop.apiKey, upsert, { input: { shopifyCustomerId: 's-1', email: 's-1@example.com' } });
    expect(created.data.customerUpsert).toEqual({ customer: { points: 100 }, created: true });
    const updated = await t.graphql(shop.apiKey, upsert, { input: { shopifyCustomerId: 's-1', email: 's-1b@example.com' } });
    expect(updated.data.customerUpsert).toEqual({ customer: { points: 100 }, created: false });
    expect((await ledgerOf(shop.shopId, 's-1')).entries).toEqual([{ type: 'earn_points', setting_type: 'rule', old_points: 0, new_points: 100 }]);

    const code = (await (await fetch(`${t.url}/rest-api/v1/referral?customerIdentifier=s-1`, { headers: { authorization: `Bearer ${shop.apiKey}` } })).json()).data.referralCode;
    const registered = await t.graphql(shop.apiKey, 'mutation($input: ReferralRegisterInput!) { referralRegister(input: $input) { userErrors { code } } }', {
      input: { referralCode: code, customer: { shopifyCustomerId: 's-2', email: 's-2@example.com' } },
    });
    expect(registered.data.referralRegister.userErrors).toEqual([]);
    expect((await ledgerOf(shop.shopId, 's-2')).points).toBe(100);
  });
});

describe('POST /actions', () => {
  let shop: { shopId: string; apiKey: string };
  beforeAll(async () => {
    shop = await t.shop('Actions shop');
    await updateShopSettings(db(), shop.shopId, { timezone: 'America/New_York' });
    await createRule(shop.apiKey, { type: 'custom', name: 'Review', earnPoint: 50, action: 'review.posted', actionLimit: 'day' });
    await createRule(shop.apiKey, { type: 'custom', name: 'Follow', earnPoint: 20, action: 'follow', actionLimit: 'once' });
    await createRule(shop.apiKey, { type: 'custom', name: 'Share', earnPoint: 5, action: 'share', actionLimit: 'unlimited' });
    await createRule(shop.apiKey, { type: 'custom', name: 'Quiz', earnPoint: 7, action: 'quiz', actionLimit: 'week', active: false });
    for (const id of ['a-1', 'a-2', 'a-3', 'a-4']) await t.customer(shop.shopId, id);
  });

  it('awards by reference, once; a repeat answers what it earned and changes nothing', async () => {
    const first = await report(shop.apiKey, { customerIdentifier: 'a-1', action: 'follow', reference: 'ig-1' });
    expect(first.status).toBe(201);
    expect(await first.json()).toMatchObject({ success: true, created: true, points: 20, activity: { type: 'earn_points', settingType: 'rule', newPoints: 20 } });
    const again = await report(shop.apiKey, { customerIdentifier: 'a-1', action: 'follow', reference: 'ig-1' });
    expect(again.status).toBe(200);
    expect(await again.json()).toMatchObject({ created: false, points: 20, activity: null });
    const other = await report(shop.apiKey, { customerIdentifier: 'a-1', action: 'follow', reference: 'ig-2' });
    expect(other.status).toBe(422);
    expect((await other.json()).error).toBe('action_limit_reached');
    expect((await ledgerOf(shop.shopId, 'a-1')).points).toBe(20);
  });

  it.each<[string, Record<string, unknown>, number, string]>([
    ['an unknown action', { customerIdentifier: 'a-2', action: 'nope', reference: 'x' }, 404, 'rule_not_found'],
    ['an inactive rule', { customerIdentifier: 'a-2', action: 'quiz', reference: 'x' }, 422, 'rule_inactive'],
    ['an unknown customer', { customerIdentifier: 'nobody', action: 'share', reference: 'x' }, 404, 'customer_not_found'],
    ['no reference', { customerIdentifier: 'a-2', action: 'share' }, 400, 'validation_error'],
  ])('refuses %s', async (_name, body, status, code) => {
    const res = await report(shop.apiKey, body);
    expect(res.status).toBe(status);
    expect((await res.json()).error).toBe(code);
    expect((await ledgerOf(shop.shopId, 'a-2')).entries).toEqual([]);
  });

  it('a daily limit counts days in the shop\'s time zone (a moved clock)', async () => {
    const at = (iso: string) => new Date(iso);
    const review = (reference: string, now: Date) => reportAction(db(), shop.shopId, { customerIdentifier: 'a-3', action: 'review.posted', reference }, now);
    expect((await review('r-1', at('2026-11-24T03:00:00Z'))).created).toBe(true); // 23 Nov in New York
    await expect(review('r-2', at('2026-11-24T04:59:00Z'))).rejects.toMatchObject({ code: 'action_limit_reached' }); // still 23 Nov
    expect((await review('r-3', at('2026-11-24T05:00:00Z'))).created).toBe(true); // 24 Nov began
    expect((await ledgerOf(shop.shopId, 'a-3')).points).toBe(100);
  });

  it('50 reports at once: one reference earns once, distinct references on a daily rule earn once, unlimited earns each', async () => {
    const same = await Promise.all(Array.from({ length: 50 }, () => report(shop.apiKey, { customerIdentifier: 'a-4', action: 'share', reference: 'post-1' })));
    expect(same.map((r) => r.status).sort()).toEqual([...Array(49).fill(200), 201]);
    // At one instant (over HTTP, a run at the shop's midnight would rightly span two days).
    const noon = new Date('2026-11-24T17:00:00Z');
    const daily = await Promise.allSettled(Array.from({ length: 50 }, (_, i) => reportAction(db(), shop.shopId, { customerIdentifier: 'a-4', action: 'review.posted', reference: `rev-${i}` }, noon)));
    expect(daily.filter((r) => r.status === 'fulfilled' && r.value.created)).toHaveLength(1);
    expect(daily.filter((r) => r.status === 'rejected' && (r.reason as { code: string }).code === 'action_limit_reached')).toHaveLength(49);
    const unlimited = await Promise.all(Array.from({ length: 50 }, (_, i) => report(shop.apiKey, { customerIdentifier: 'a-4', action: 'share', reference: `post-${i + 2}` })));
    expect(unlimited.every((r) => r.status === 201)).toBe(true);
    expect((await ledgerOf(shop.shopId, 'a-4')).points).toBe(5 + 50 + 50 * 5);
  });

  it('eligibility says what the customer has earned, and GraphQL actionReport mirrors POST /actions', async () => {
    const res = await (await fetch(`${t.url}/rest-api/v1/earningRules/eligibility?customerIdentifier=a-1`, { headers: { authorization: `Bearer ${shop.apiKey}` } })).json();
    expect(Object.fromEntries(res.data.map((r: { action: string; isEarned: boolean }) => [r.action, r.isEarned]))).toEqual({ 'review.posted': false, follow: true, share: false, quiz: false });
    const gql = await t.graphql(shop.apiKey, 'mutation { actionReport(input: { customerIdentifier: "a-1", action: "follow", reference: "ig-1" }) { created points userErrors { code } } }');
    expect(gql.data.actionReport).toEqual({ created: false, points: 20, userErrors: [] });
  });
});
