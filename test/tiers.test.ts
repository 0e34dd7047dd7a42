import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Migrator, sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migrations } from '../migrations/index.js';
import { openDatabase } from '../src/db/database.js';
import { underMigrationLock } from '../src/db/migrate.js';
import { importCustomers, type ImportRecord } from '../src/domain/imports/customers-import.js';
import { startOfShopDay } from '../src/domain/kernel/calendar.js';
import { changePoints } from '../src/domain/ledger/points.js';
import { upsertOrder } from '../src/domain/orders/order-writes.js';
import { createEarningRule } from '../src/domain/program/earning-rules.js';
import { upsertCustomer } from '../src/domain/program/sign-up.js';
import { createShop } from '../src/domain/shops/shops.js';
import { isolatedPostgresUrl, movableClock, onPostgres, startTestApp, type TestApp } from './helpers.js';
import { until } from './live-helpers.js';

const DAY = 86_400_000;

const advance = (clock: ReturnType<typeof movableClock>, ms: number) => clock.moveTo(new Date(clock.now() + ms));

const SETTINGS = 'mutation($input: ShopSettingsInput!) { shopSettingsUpdate(input: $input) { settings { tiers { metric window days } } userErrors { code field message } } }';
const CREATE = 'mutation($input: TierCreateInput!) { tierCreate(input: $input) { tier { id name threshold multiplier } userErrors { code field message } } }';
const UPDATE = 'mutation($input: TierUpdateInput!) { tierUpdate(input: $input) { tier { id name threshold multiplier } userErrors { code field message } } }';
const DELETE = 'mutation($id: ID!) { tierDelete(id: $id) { deletedTierId userErrors { code field message } } }';
const STANDING = 'query($id: String!) { customer(identifier: $id) { points tier { tier { name multiplier } since } tierProgress { current next { name } remaining } } }';

async function settings(t: TestApp, apiKey: string, input: Record<string, unknown>) {
  const res = await t.graphql(apiKey, SETTINGS, { input });
  return res.data?.shopSettingsUpdate ?? res;
}

async function createTier(t: TestApp, apiKey: string, input: Record<string, unknown>) {
  const res = await t.graphql(apiKey, CREATE, { input });
  return res.data?.tierCreate ?? res;
}

/** A shop with a place_order rule of 1 point per dollar, its tier settings and its ladder. */
async function tierShop(t: TestApp, tiers: Record<string, unknown> | null, ladder: Array<{ name: string; threshold: string; multiplier?: string }>, timezone = 'UTC') {
  const shop = await t.shop('Tier shop');
  expect((await settings(t, shop.apiKey, { timezone, ...(tiers ? { tiers } : {}) })).userErrors).toEqual([]);
  const rule = await t.graphql(shop.apiKey, 'mutation { earningRuleCreate(input: { type: place_order, name: "Per dollar", earnPoint: 1, spent: "1.00" }) { userErrors { message } } }');
  expect(rule.data.earningRuleCreate.userErrors).toEqual([]);
  const ids: Record<string, string> = {};
  for (const tier of ladder) {
    const created = await createTier(t, shop.apiKey, tier);
    expect(created.userErrors).toEqual([]);
    ids[tier.name] = created.tier.id;
  }
  return { ...shop, tierIds: ids };
}

async function standing(t: TestApp, apiKey: string, id: string) {
  const res = await t.graphql(apiKey, STANDING, { id });
  expect(res.errors).toBeUndefined();
  return res.data.customer;
}

const addPoints = (t: TestApp, apiKey: string, customerIdentifier: string, amount: number) => t.post('/rest-api/v1/points/add', { customerIdentifier, amount }, apiKey);

function putOrder(t: TestApp, apiKey: string, orderId: string, customerIdentifier: string, total: string, extra: Record<string, unknown> = {}) {
  return fetch(`${t.url}/rest-api/v1/orders/${orderId}`, {
    method: 'PUT',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${apiKey}` },
    body: JSON.stringify({ customerIdentifier, currency: 'USD', subtotal: total, shipping: '0', tax: '0', total, refunded: '0', status: 'paid', lineItems: [{ productId: 'P-1', quantity: 1, price: total, discount: '0' }], ...extra }),
  });
}

async function tierEvents(t: TestApp, shopId: string) {
  const rows = await t.app.database.db.selectFrom('outbox_events').select('data').where('shop_id', '=', shopId).where('type', '=', 'tiers/changed').orderBy('seq').execute();
  return rows.map((r) => r.data as { customer: string; previousTier: { name: string } | null; tier: { name: string } | null; reason: string });
}

const tierNames = (events: Awaited<ReturnType<typeof tierEvents>>) => events.map((e) => [e.previousTier?.name ?? null, e.tier?.name ?? null, e.reason]);

describe('the ladder: CRUD and bad input', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp({ WORKER: 'off' });
  });
  afterAll(() => t?.stop());

  it('lists tiers by threshold; refuses overlapping, unordered or malformed ones, and changes nothing then', async () => {
    const shop = await tierShop(t, null, [
      { name: 'Gold', threshold: '1000', multiplier: '1.5' },
      { name: 'Silver', threshold: '500', multiplier: '1.25' },
    ]);
    const list = async () => (await t.graphql(shop.apiKey, '{ tiers { name threshold multiplier } }')).data.tiers;
    const before = [
      { name: 'Silver', threshold: '500', multiplier: '1.25' },
      { name: 'Gold', threshold: '1000', multiplier: '1.5' },
    ];
    expect(await list()).toEqual(before);

    const refused = async (input: Record<string, unknown>, code: string) => {
      const res = await createTier(t, shop.apiKey, input);
      expect(res.tier).toBeNull();
      expect(res.userErrors[0].code).toBe(code);
    };
    await refused({ name: 'Bronze', threshold: '500' }, 'tier_threshold_taken');
    await refused({ name: 'gold', threshold: '700', multiplier: '1.3' }, 'tier_name_taken');
    // A higher tier that earns less than a lower one: the ladder would be unordered.
    await refused({ name: 'Platinum', threshold: '2000', multiplier: '1.1' }, 'tier_order');
    await refused({ name: 'Bronze', threshold: '100', multiplier: '1.3' }, 'tier_order');
    await refused({ name: 'Bronze', threshold: '-5' }, 'validation_error');
    await refused({ name: 'Bronze', threshold: '12.5' }, 'validation_error');
    await refused({ name: 'Bronze', threshold: 'lots' }, 'validation_error');
    await refused({ name: 'Bronze', threshold: '99999999999' }, 'validation_error');
    await refused({ name: 'Bronze', threshold: '100', multiplier: '0.5' }, 'validation_error');
    await refused({ name: 'Bronze', threshold: '100', multiplier: '101' }, 'validation_error');
    await refused({ name: 'Bronze', threshold: '100', multiplier: '1.00001' }, 'validation_error');
    await refused({ name: '', threshold: '100' }, 'validation_error');
    const update = await t.graphql(shop.apiKey, UPDATE, { input: { id: shop.tierIds.Silver, multiplier: '2' } });
    expect(update.data.tierUpdate.userErrors[0].code).toBe('tier_order');
    const unknown = await t.graphql(shop.apiKey, UPDATE, { input: { id: 'nope', name: 'X' } });
    expect(unknown.data.tierUpdate.userErrors[0].code).toBe('tier_not_found');
    expect(await list()).toEqual(before);

    // The metric is fixed while tiers count by it; a bad window is refused whole.
    expect((await settings(t, shop.apiKey, { tiers: { metric: 'amount_spent' } })).userErrors[0].code).toBe('tier_metric_in_use');
    expect((await settings(t, shop.apiKey, { tiers: { window: 'rolling_days', days: 0 } })).userErrors[0].code).toBe('validation_error');
    expect((await settings(t, shop.apiKey, { tiers: { window: 'rolling_days', days: 5000 } })).userErrors[0].code).toBe('validation_error');
    const bad = await t.graphql(shop.apiKey, SETTINGS, { input: { tiers: { window: 'forever' } } });
    expect(bad.errors[0].message).toMatch(/forever/);
    expect((await settings(t, shop.apiKey, {})).settings.tiers).toEqual({ metric: 'points_earned', window: 'lifetime', days: 365 });
  });

  it('a tier held by customers cannot be deleted; once nobody holds it, it can', async () => {
    const shop = await tierShop(t, null, [{ name: 'Silver', threshold: '100', multiplier: '1.5' }]);
    await t.customer(shop.shopId, 'held');
    expect((await addPoints(t, shop.apiKey, 'held', 150)).status).toBe(200);
    expect((await standing(t, shop.apiKey, 'held')).tier.tier.name).toBe('Silver');
    const res = await t.graphql(shop.apiKey, DELETE, { id: shop.tierIds.Silver });
    expect(res.data.tierDelete).toMatchObject({ deletedTierId: null, userErrors: [{ code: 'tier_in_use' }] });
    expect((await standing(t, shop.apiKey, 'held')).tier.tier.name).toBe('Silver');

    // Out of reach, the evaluation moves the holder down; then the tier can go, and the metric stops being kept.
    expect((await t.graphql(shop.apiKey, UPDATE, { input: { id: shop.tierIds.Silver, threshold: '1000' } })).data.tierUpdate.userErrors).toEqual([]);
    await t.app.scheduler.runDue();
    expect((await standing(t, shop.apiKey, 'held')).tier).toBeNull();
    expect((await t.graphql(shop.apiKey, DELETE, { id: shop.tierIds.Silver })).data.tierDelete).toEqual({ deletedTierId: shop.tierIds.Silver, userErrors: [] });
    const db = t.app.database.db;
    expect(await db.selectFrom('tier_members').select('customer_id').where('shop_id', '=', shop.shopId).execute()).toEqual([]);
    expect((await db.selectFrom('shops').select('tiers_on').where('id', '=', shop.shopId).executeTakeFirstOrThrow()).tiers_on).toBe(false);
    expect((await t.graphql(shop.apiKey, DELETE, { id: shop.tierIds.Silver })).data.tierDelete.userErrors[0].code).toBe('tier_not_found');
  });

  it('another shop\'s tier can be neither changed nor deleted', async () => {
    const a = await tierShop(t, null, [{ name: 'Silver', threshold: '100' }]);
    const b = await t.shop('Other');
    expect((await t.graphql(b.apiKey, UPDATE, { input: { id: a.tierIds.Silver, name: 'Mine' } })).data.tierUpdate.userErrors[0].code).toBe('tier_not_found');
    expect((await t.graphql(b.apiKey, DELETE, { id: a.tierIds.Silver })).data.tierDelete.userErrors[0].code).toBe('tier_not_found');
    expect((await t.graphql(b.apiKey, '{ tiers { id } }')).data.tiers).toEqual([]);
  });
});

describe('upgrades at once, and the multiplier on place_order', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp({ WORKER: 'off' });
  });
  afterAll(() => t?.stop());

  it('points/add crossing a threshold upgrades at once (one event per change); orders then earn × the multiplier, floored once', async () => {
    const shop = await tierShop(t, null, [
      { name: 'Silver', threshold: '100', multiplier: '1.5' },
      { name: 'Gold', threshold: '300', multiplier: '2' },
    ]);
    await t.customer(shop.shopId, 'ada');
    expect(await standing(t, shop.apiKey, 'ada')).toMatchObject({ tier: null, tierProgress: { current: '0', next: { name: 'Silver' }, remaining: '100' } });
    expect((await addPoints(t, shop.apiKey, 'ada', 99)).status).toBe(200);
    expect((await standing(t, shop.apiKey, 'ada')).tier).toBeNull();
    expect((await addPoints(t, shop.apiKey, 'ada', 1)).status).toBe(200);
    expect(await standing(t, shop.apiKey, 'ada')).toMatchObject({ tier: { tier: { name: 'Silver', multiplier: '1.5' } }, tierProgress: { current: '100', next: { name: 'Gold' }, remaining: '200' } });

    // $7.00 at ×1.5: 10.5, floored once to 10 (not 7 × 1 × 1.5 rounded per unit).
    const res = await putOrder(t, shop.apiKey, 'O-1', 'ada', '7.00');
    expect(res.status).toBe(201);
    expect((await res.json()).order.pointsEarned).toBe(10);
    const row = await t.app.database.db.selectFrom('orders').select('earn_snapshot').where('order_id', '=', 'O-1').where('shop_id', '=', shop.shopId).executeTakeFirstOrThrow();
    expect(row.earn_snapshot).toMatchObject({ multiplierBp: 15_000 });

    // The order's earn (points_earned) and 190 more lift her to Gold; a refund of $3 recomputes by the snapshot's ×1.5 ($4 × 1.5 = 6: 4 back), not Gold's ×2.
    expect((await addPoints(t, shop.apiKey, 'ada', 190)).status).toBe(200);
    expect((await standing(t, shop.apiKey, 'ada')).tier.tier.name).toBe('Gold');
    const refund = await putOrder(t, shop.apiKey, 'O-1', 'ada', '7.00', { refunded: '3.00', status: 'partially_refunded' });
    expect((await refund.json()).order).toMatchObject({ pointsEarned: 6, pointsClawedBack: 4 });
    // Gold's ×2 on the next order.
    expect((await (await putOrder(t, shop.apiKey, 'O-2', 'ada', '7.00')).json()).order.pointsEarned).toBe(14);
    // The clawback lowered the metric (296 + 14): no fall on the spot.
    expect((await standing(t, shop.apiKey, 'ada')).tier.tier.name).toBe('Gold');
    expect(tierNames(await tierEvents(t, shop.shopId))).toEqual([
      [null, 'Silver', 'upgrade'],
      ['Silver', 'Gold', 'upgrade'],
    ]);
  });

  it('an imported balance is not points earned here: the import sets it (update_points), no metric counts it; an add does', async () => {
    const shop = await tierShop(t, null, [{ name: 'Silver', threshold: '100' }]);
    async function* records(): AsyncGenerator<ImportRecord> {
      yield { line: 1, value: { shopifyCustomerId: 'imported', email: 'imported@example.com', points: 500 } };
    }
    expect(await importCustomers(t.app.database, shop.shopId, records())).toMatchObject({ created: 1, balancesSet: 1 });
    expect(await standing(t, shop.apiKey, 'imported')).toMatchObject({ points: 500, tier: null, tierProgress: { current: '0', remaining: '100' } });
    expect((await addPoints(t, shop.apiKey, 'imported', 100)).status).toBe(200);
    expect(await standing(t, shop.apiKey, 'imported')).toMatchObject({ points: 600, tier: { tier: { name: 'Silver' } }, tierProgress: { current: '100' } });
  });

  it('a batch of new orders of customers with and without a multiplier: each earns by its own tier', async () => {
    const shop = await tierShop(t, null, [{ name: 'Silver', threshold: '50', multiplier: '1.25' }]);
    const ids = Array.from({ length: 20 }, (_, i) => `b-${i}`);
    for (const id of ids) await t.customer(shop.shopId, id);
    for (const id of ids.filter((_, i) => i % 2 === 0)) expect((await addPoints(t, shop.apiKey, id, 50)).status).toBe(200);
    const answers = await Promise.all(ids.map((id, i) => putOrder(t, shop.apiKey, `B-${i}`, id, '10.00')));
    const earned = await Promise.all(answers.map(async (r) => (await r.json()).order.pointsEarned));
    expect(earned).toEqual(ids.map((_, i) => (i % 2 === 0 ? 12 : 10)));
    for (const [i, id] of ids.entries()) expect((await standing(t, shop.apiKey, id)).points).toBe(i % 2 === 0 ? 62 : 10);
  });

  it('a new tier ranks existing customers by their history at once (the evaluation it schedules)', async () => {
    const shop = await tierShop(t, null, []);
    await t.customer(shop.shopId, 'old');
    expect((await addPoints(t, shop.apiKey, 'old', 400)).status).toBe(200);
    expect((await createTier(t, shop.apiKey, { name: 'Gold', threshold: '300', multiplier: '2' })).userErrors).toEqual([]);
    expect((await standing(t, shop.apiKey, 'old')).tier).toBeNull();
    await t.app.scheduler.runDue();
    expect((await standing(t, shop.apiKey, 'old')).tier.tier.name).toBe('Gold');
    expect(tierNames(await tierEvents(t, shop.shopId))).toEqual([[null, 'Gold', 'evaluation']]);
  });

  it('REST GET /vip/tiers/customer: the tier, since when, and the progress; 404 for an unknown customer', async () => {
    const shop = await tierShop(t, null, [
      { name: 'Silver', threshold: '100', multiplier: '1.5' },
      { name: 'Gold', threshold: '300', multiplier: '2' },
    ]);
    await t.customer(shop.shopId, 'rest');
    expect((await addPoints(t, shop.apiKey, 'rest', 120)).status).toBe(200);
    const res = await fetch(`${t.url}/rest-api/v1/vip/tiers/customer?customerIdentifier=rest`, { headers: { authorization: `Bearer ${shop.apiKey}` } });
    expect(res.status).toBe(200);
    const body = await res.json();
    expect(body).toMatchObject({
      success: true,
      data: { tier: { id: shop.tierIds.Silver, name: 'Silver', threshold: '100', multiplier: '1.5' }, metric: 'points_earned', window: 'lifetime', progress: { current: '120', next: { name: 'Gold' }, remaining: '180' } },
    });
    expect(Date.parse(body.data.since)).toBeGreaterThan(Date.now() - 60_000);
    const missing = await fetch(`${t.url}/rest-api/v1/vip/tiers/customer?customerIdentifier=nobody`, { headers: { authorization: `Bearer ${shop.apiKey}` } });
    expect(missing.status).toBe(404);
    const bad = await fetch(`${t.url}/rest-api/v1/vip/tiers/customer`, { headers: { authorization: `Bearer ${shop.apiKey}` } });
    expect(bad.status).toBe(400);
  });
});

describe('downgrades only at the daily evaluation', () => {
  const clock = movableClock();
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp({ WORKER: 'off' }, { clock: clock.now });
  });
  afterAll(() => t?.stop());

  it('amount_spent: a refund lowers the metric at once, the tier the next day', async () => {
    const shop = await tierShop(t, { metric: 'amount_spent' }, [{ name: 'Silver', threshold: '50.00', multiplier: '1.5' }], 'Europe/Paris');
    await t.customer(shop.shopId, 'spender');
    expect((await putOrder(t, shop.apiKey, 'S-1', 'spender', '60.00')).status).toBe(201);
    expect(await standing(t, shop.apiKey, 'spender')).toMatchObject({ tier: { tier: { name: 'Silver' } }, tierProgress: { current: '60.00', next: null, remaining: null } });
    // A pending or cancelled order counts nothing; a refund leaves the day the order counts on.
    expect((await putOrder(t, shop.apiKey, 'S-1', 'spender', '60.00', { refunded: '20.00', status: 'partially_refunded' })).status).toBe(200);
    expect((await putOrder(t, shop.apiKey, 'S-2', 'spender', '30.00', { status: 'pending' })).status).toBe(201);
    expect(await standing(t, shop.apiKey, 'spender')).toMatchObject({ tier: { tier: { name: 'Silver' } }, tierProgress: { current: '40.00', next: null } });
    advance(clock, DAY);
    await t.app.scheduler.runDue();
    expect((await standing(t, shop.apiKey, 'spender')).tier).toBeNull();
    expect((await standing(t, shop.apiKey, 'spender')).tierProgress).toMatchObject({ current: '40.00', next: { name: 'Silver' }, remaining: '10.00' });
    // Paid now: up at once again.
    expect((await putOrder(t, shop.apiKey, 'S-2', 'spender', '30.00')).status).toBe(200);
    expect((await standing(t, shop.apiKey, 'spender')).tier.tier.name).toBe('Silver');
    expect(tierNames(await tierEvents(t, shop.shopId))).toEqual([
      [null, 'Silver', 'upgrade'],
      ['Silver', null, 'evaluation'],
      [null, 'Silver', 'upgrade'],
    ]);
  });

  it('rolling_days: the tier holds while the points are in the window, and falls at the first evaluation after', async () => {
    clock.moveTo(new Date());
    const shop = await tierShop(t, { window: 'rolling_days', days: 30 }, [{ name: 'Silver', threshold: '100' }], 'America/New_York');
    await t.customer(shop.shopId, 'roller');
    expect((await addPoints(t, shop.apiKey, 'roller', 100)).status).toBe(200);
    await t.app.scheduler.runDue();
    advance(clock, 28 * DAY);
    await t.app.scheduler.runDue();
    expect((await standing(t, shop.apiKey, 'roller')).tier.tier.name).toBe('Silver');
    advance(clock, 3 * DAY);
    await t.app.scheduler.runDue();
    expect((await standing(t, shop.apiKey, 'roller')).tier).toBeNull();
    expect(tierNames(await tierEvents(t, shop.shopId))).toEqual([
      [null, 'Silver', 'upgrade'],
      ['Silver', null, 'evaluation'],
    ]);
  });

  it('calendar_year: qualifying in year Y keeps the tier through Y+1, in the shop\'s time zone', async () => {
    clock.moveTo(new Date());
    const zone = 'Pacific/Auckland';
    const shop = await tierShop(t, { window: 'calendar_year' }, [{ name: 'Gold', threshold: '100' }], zone);
    await t.customer(shop.shopId, 'yearly');
    expect((await addPoints(t, shop.apiKey, 'yearly', 100)).status).toBe(200);
    await t.app.scheduler.runDue();
    const year = Number(new Intl.DateTimeFormat('en-CA', { timeZone: zone, year: 'numeric' }).format(new Date()));
    // The last minute of Y+1 in Auckland, then the first of Y+2.
    const lastDay = startOfShopDay(`${year + 2}-01-01`, zone);
    clock.moveTo(new Date(lastDay.getTime() - 60_000));
    await t.app.scheduler.runDue();
    expect(await standing(t, shop.apiKey, 'yearly')).toMatchObject({ tier: { tier: { name: 'Gold' } } });
    clock.moveTo(new Date(lastDay.getTime() + 60_000));
    await t.app.scheduler.runDue();
    expect((await standing(t, shop.apiKey, 'yearly')).tier).toBeNull();
  });
});

describe('the window\'s arithmetic, from a table', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp({ WORKER: 'off' });
  });
  afterAll(() => t?.stop());

  // Days with points: 2025-12-31 (10), 2026-01-01 (20), 2026-02-28 (40), 2026-03-08 (80), 2026-12-31 (160), 2028-02-29 (320).
  it.each([
    ['lifetime', 0, '2026-03-08T12:00:00Z', 'UTC', false, 150],
    ['lifetime', 0, '2030-01-01T00:00:00Z', 'UTC', false, 630],
    // Year boundaries in the shop's zone: 2026-01-01 begins in Auckland at 11:00 UTC on 31 December.
    ['calendar_year', 0, '2025-12-31T10:59:00Z', 'Pacific/Auckland', false, 10],
    ['calendar_year', 0, '2025-12-31T11:00:00Z', 'Pacific/Auckland', false, 20],
    ['calendar_year', 0, '2025-12-31T11:00:00Z', 'Pacific/Auckland', true, 20],
    ['calendar_year', 0, '2027-06-01T00:00:00Z', 'UTC', false, 0],
    ['calendar_year', 0, '2027-06-01T00:00:00Z', 'UTC', true, 300],
    ['calendar_year', 0, '2028-01-01T00:00:00Z', 'UTC', true, 0],
    // 29 February counts in its year; the next year looks back at it.
    ['calendar_year', 0, '2028-02-29T12:00:00Z', 'UTC', false, 320],
    ['calendar_year', 0, '2029-02-28T12:00:00Z', 'UTC', true, 320],
    // Rolling: the last N shop-local days, today included; across the DST change of 8 March 2026 in New York.
    ['rolling_days', 7, '2026-03-08T12:00:00Z', 'America/New_York', false, 80],
    ['rolling_days', 9, '2026-03-08T12:00:00Z', 'America/New_York', false, 120],
    ['rolling_days', 9, '2026-03-09T03:59:00Z', 'America/New_York', false, 120],
    ['rolling_days', 9, '2026-03-09T04:00:00Z', 'America/New_York', false, 80],
    ['rolling_days', 1, '2028-03-01T00:00:00Z', 'UTC', false, 0],
    ['rolling_days', 2, '2028-03-01T00:00:00Z', 'UTC', false, 320],
  ])('%s (%i days) at %s in %s, with last year %s: %i', async (window, days, at, zone, withPrior, value) => {
    const db = t.app.database.db;
    const shop = await t.shop('Window');
    await t.customer(shop.shopId, 'w');
    const { id } = await db.selectFrom('customers').select('id').where('shop_id', '=', shop.shopId).executeTakeFirstOrThrow();
    const buckets: Array<[string, number]> = [['2025-12-31', 10], ['2026-01-01', 20], ['2026-02-28', 40], ['2026-03-08', 80], ['2026-12-31', 160], ['2028-02-29', 320]];
    await db.insertInto('tier_metric_days').values(buckets.map(([day, points]) => ({ customer_id: id, day, points, spent: 0 }))).execute();
    const { rows } = await sql<{ v: number }>`select metric_value as v from tier_values(array[${id}], 'points_earned', ${window}, ${days}::int, ${zone}, ${at}::timestamptz, ${withPrior})`.execute(db);
    expect(Number(rows[0]!.v)).toBe(value);
  });
});

describe.runIf(onPostgres)('on PostgreSQL, under concurrency', () => {
  it('50 racing adds crossing two thresholds: one upgrade per tier crossed, the final tier right, the metric exact', async () => {
    const pg = await isolatedPostgresUrl();
    const a = await startTestApp({ DATABASE_URL: pg.url, WORKER: 'off' });
    const b = await startTestApp({ DATABASE_URL: pg.url, WORKER: 'off' });
    try {
      const shop = await tierShop(a, null, [
        { name: 'Silver', threshold: '100', multiplier: '1.5' },
        { name: 'Gold', threshold: '400', multiplier: '2' },
      ]);
      await a.customer(shop.shopId, 'racer');
      const answers = await Promise.all(Array.from({ length: 50 }, (_, i) => addPoints(i % 2 ? a : b, shop.apiKey, 'racer', 10)));
      expect(answers.map((r) => r.status)).toEqual(answers.map(() => 200));
      expect(await standing(a, shop.apiKey, 'racer')).toMatchObject({ points: 500, tier: { tier: { name: 'Gold' } }, tierProgress: { current: '500' } });
      expect(tierNames(await tierEvents(a, shop.shopId))).toEqual([
        [null, 'Silver', 'upgrade'],
        ['Silver', 'Gold', 'upgrade'],
      ]);
    } finally {
      await a.stop();
      await b.stop();
      await pg.drop();
    }
  }, 60_000);

  it('two instances evaluate each member once; a write racing the evaluation is never undone by it', async () => {
    const pg = await isolatedPostgresUrl();
    const a = await startTestApp({ DATABASE_URL: pg.url, WORKER: 'off' });
    const b = await startTestApp({ DATABASE_URL: pg.url, WORKER: 'off' });
    try {
      const shop = await tierShop(a, null, [{ name: 'Silver', threshold: '100' }]);
      const ids = Array.from({ length: 60 }, (_, i) => `m-${i}`);
      for (const id of ids) await a.customer(shop.shopId, id);
      await Promise.all(ids.map((id) => addPoints(a, shop.apiKey, id, 100)));
      await a.app.scheduler.runDue();
      // Silver now takes 150: every member falls at the evaluation this schedules, once, whichever
      // instance walks them; meanwhile ten of them earn 100 more, which keeps (or makes) them Silver.
      expect((await a.graphql(shop.apiKey, UPDATE, { input: { id: shop.tierIds.Silver, threshold: '150' } })).data.tierUpdate.userErrors).toEqual([]);
      await Promise.all([
        a.app.scheduler.runDue(),
        b.app.scheduler.runDue(),
        ...ids.slice(0, 10).map((id) => addPoints(id.endsWith('1') ? a : b, shop.apiKey, id, 100)),
        a.app.scheduler.runDue(),
        b.app.scheduler.runDue(),
      ]);
      await a.app.scheduler.runDue();
      const events = await tierEvents(a, shop.shopId);
      const members = await a.app.database.db
        .selectFrom('tier_members as m')
        .innerJoin('customers as c', 'c.id', 'm.customer_id')
        .select(['c.id', 'c.shopify_customer_id', 'm.tier_id'])
        .where('m.shop_id', '=', shop.shopId)
        .execute();
      const held = new Map(members.map((m) => [m.shopify_customer_id, m.tier_id]));
      for (const id of ids.slice(0, 10)) expect(held.get(id)).toBe(shop.tierIds.Silver);
      for (const id of ids.slice(10)) expect(held.get(id)).toBeNull();
      // Fifty falls, one each; the ten that earned fell and rose again at most once.
      const byCustomer = new Map<string, typeof events>();
      for (const e of events) byCustomer.set(e.customer, [...(byCustomer.get(e.customer) ?? []), e]);
      const shopifyId = new Map(members.map((m) => [m.id, m.shopify_customer_id]));
      for (const [customer, list] of byCustomer) {
        expect(tierNames(list)[0]).toEqual([null, 'Silver', 'upgrade']);
        const names = tierNames(list).slice(1);
        if (ids.slice(10).includes(shopifyId.get(customer)!)) expect(names).toEqual([['Silver', null, 'evaluation']]);
        else expect([[], [['Silver', null, 'evaluation'], [null, 'Silver', 'upgrade']]]).toContainEqual(names);
      }
      // The events, replayed in order, end at what each member holds.
      const replayed = new Map<string, string | null>();
      for (const e of events) replayed.set(e.customer, e.tier ? shop.tierIds[e.tier.name]! : null);
      for (const m of members) expect(replayed.get(m.id)).toBe(m.tier_id);
    } finally {
      await a.stop();
      await b.stop();
      await pg.drop();
    }
  }, 60_000);
});

describe('after downtime', () => {
  it('a restart runs the evaluations missed while the service was down, once', async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'loyalty-tiers-'));
    const pg = onPostgres ? await isolatedPostgresUrl() : undefined;
    const env: Record<string, string> = pg ? { DATABASE_URL: pg.url } : { DATA_DIR: dir };
    const clock = movableClock();
    try {
      const first = await startTestApp({ ...env, WORKER: 'off' }, { clock: clock.now });
      const shop = await tierShop(first, { window: 'rolling_days', days: 5 }, [{ name: 'Silver', threshold: '100' }]);
      for (const id of ['r-1', 'r-2', 'r-3']) {
        await first.customer(shop.shopId, id);
        expect((await addPoints(first, shop.apiKey, id, 100)).status).toBe(200);
      }
      await first.app.scheduler.runDue();
      await first.stop();
      advance(clock, 12 * DAY);
      const second = await startTestApp(env, { clock: clock.now });
      try {
        await until(async () => (await tierEvents(second, shop.shopId)).filter((e) => e.reason === 'evaluation').length === 3, 10_000, 'the members fell');
        await second.app.scheduler.runDue();
        expect(tierNames(await tierEvents(second, shop.shopId)).filter(([, , reason]) => reason === 'evaluation')).toEqual([
          ['Silver', null, 'evaluation'],
          ['Silver', null, 'evaluation'],
          ['Silver', null, 'evaluation'],
        ]);
        const run = await second.app.database.db.selectFrom('shop_day_runs').selectAll().where('shop_id', '=', shop.shopId).where('kind', '=', 'tiers').executeTakeFirstOrThrow();
        expect(run.due_at.getTime()).toBeGreaterThan(clock.now());
      } finally {
        await second.stop();
      }
    } finally {
      await pg?.drop();
      await rm(dir, { recursive: true, force: true });
    }
  }, 60_000);
});

// Issue 31, item 11: a refund lowers points_earned by every point the order no longer earns
// (spent ones included), on the days the order's points counted on; the tier still falls only at
// the daily evaluation. Orders are written at the moved clock's time (the domain call REST makes).
describe('buy, spend, return: the metric falls by what the order no longer earns', () => {
  const clock = movableClock();
  let t: TestApp;
  let start: Date;
  beforeAll(async () => {
    t = await startTestApp({ WORKER: 'off' }, { clock: clock.now });
  });
  afterAll(() => t?.stop());
  const db = () => t.app.database.db;
  /** The UTC date `n` days after the test began. */
  const day = (n: number) => new Date(start.getTime() + n * DAY).toISOString().slice(0, 10);
  const begin = (at = new Date()) => {
    start = at;
    clock.moveTo(at);
  };

  const subtract = (shop: { apiKey: string }, id: string, amount: number) => t.post('/rest-api/v1/points/substract', { customerIdentifier: id, amount }, shop.apiKey);
  /** Two lines, $40.00 and $20.00 (and `extra`); `back` of the $20.00 one returned with its money. */
  const twoLines = (back: number, extra: Array<{ productId: string; quantity: number; price: string; refundedQuantity?: number }> = []) => {
    const lineItems = [{ productId: 'coat', quantity: 1, price: '40.00' }, { productId: 'scarf', quantity: 1, price: '20.00', refundedQuantity: back }, ...extra];
    const total = (60 + extra.reduce((sum, l) => sum + Number(l.price), 0)).toFixed(2);
    return { subtotal: total, total, refunded: back ? '20.00' : '0', status: back ? 'partially_refunded' : 'paid', lineItems };
  };
  /** The order's state written as PUT /orders writes it, at the clock's time. */
  const order = async (shop: { shopId: string }, orderId: string, customerIdentifier: string, state: Record<string, unknown>) =>
    (await upsertOrder(db(), shop.shopId, orderId, { customerIdentifier, currency: 'USD', shipping: '0', tax: '0', ...state }, new Date(clock.now()))).order;
  const oneLine = (total: string, extra: Record<string, unknown> = {}) => ({ subtotal: total, total, refunded: '0', status: 'paid', lineItems: [{ productId: 'P-1', quantity: 1, price: total }], ...extra });
  /** The customer's metric over the shop's window at the clock's time (this year's, for calendar_year). */
  const metric = async (shopId: string, id: string) => {
    const { rows } = await sql<{ v: string }>`
      select v.metric_value as v from customers c join shops s on s.id = c.shop_id
      cross join lateral tier_values(array[c.id], s.tier_metric, s.tier_window, s.tier_window_days, s.timezone, ${new Date(clock.now())}, false) v
      where c.shop_id = ${shopId} and c.shopify_customer_id = ${id}`.execute(db());
    return Number(rows[0]!.v);
  };
  const tierOf = async (shop: { apiKey: string }, id: string) => (await standing(t, shop.apiKey, id)).tier?.tier.name ?? null;
  const metricDays = async (shopId: string) => {
    const rows = await db()
      .selectFrom('tier_metric_days as d')
      .innerJoin('customers as c', 'c.id', 'd.customer_id')
      .select(['c.shopify_customer_id', 'd.day', 'd.points'])
      .where('c.shop_id', '=', shopId)
      .orderBy('c.shopify_customer_id')
      .orderBy('d.day')
      .execute();
    return rows.map((r) => [r.shopify_customer_id, new Date(r.day as unknown as string).toISOString().slice(0, 10), Number(r.points)]);
  };

  it('spent, then refunded in full: the metric drops to 0 at once, the tier at the next evaluation', async () => {
    begin();
    const shop = await tierShop(t, null, [{ name: 'Gold', threshold: '50' }]);
    await t.customer(shop.shopId, 'returner');
    await order(shop, 'R-1', 'returner', oneLine('60.00'));
    expect((await subtract(shop, 'returner', 60)).status).toBe(200);
    // Spending never costs the tier.
    expect(await metric(shop.shopId, 'returner')).toBe(60);
    expect(await tierOf(shop, 'returner')).toBe('Gold');
    expect(await order(shop, 'R-1', 'returner', oneLine('60.00', { refunded: '60.00', status: 'refunded' }))).toMatchObject({ pointsEarned: 0, pointsClawedBack: 60, unrecoveredPoints: 60 });
    // Not one point came back from the balance, yet all 60 leave the metric; the tier waits for the evaluation.
    expect((await standing(t, shop.apiKey, 'returner')).points).toBe(0);
    expect(await metric(shop.shopId, 'returner')).toBe(0);
    expect(await tierOf(shop, 'returner')).toBe('Gold');
    advance(clock, DAY);
    await t.app.scheduler.runDue();
    expect(await tierOf(shop, 'returner')).toBeNull();
    expect(tierNames(await tierEvents(t, shop.shopId))).toEqual([
      [null, 'Gold', 'upgrade'],
      ['Gold', null, 'evaluation'],
    ]);
    expect(await metricDays(shop.shopId)).toEqual([['returner', day(0), 0]]);
  });

  it('partly spent, partly refunded: recovered and unrecovered points both leave; a later edit counts in full', async () => {
    begin();
    const shop = await tierShop(t, null, [
      { name: 'Silver', threshold: '30' },
      { name: 'Gold', threshold: '50' },
    ]);
    await t.customer(shop.shopId, 'partial');
    await order(shop, 'P-1', 'partial', twoLines(0));
    expect((await subtract(shop, 'partial', 50)).status).toBe(200);
    // The scarf back: 20 points owed, 10 from the balance, 10 already spent.
    expect(await order(shop, 'P-1', 'partial', twoLines(1))).toMatchObject({ pointsEarned: 40, pointsClawedBack: 20, unrecoveredPoints: 10 });
    expect(await metric(shop.shopId, 'partial')).toBe(40);
    expect(await tierOf(shop, 'partial')).toBe('Gold');
    advance(clock, DAY);
    await t.app.scheduler.runDue();
    expect(await tierOf(shop, 'partial')).toBe('Silver');
    // An edit adds a $15.00 hat: 15 points credited in full (a shortfall is no debt), counted on the edit's day.
    expect(await order(shop, 'P-1', 'partial', twoLines(1, [{ productId: 'hat', quantity: 1, price: '15.00' }]))).toMatchObject({ pointsEarned: 55, unrecoveredPoints: 10 });
    expect((await standing(t, shop.apiKey, 'partial')).points).toBe(15);
    expect(await metric(shop.shopId, 'partial')).toBe(55);
    expect(await tierOf(shop, 'partial')).toBe('Gold');
    expect(await metricDays(shop.shopId)).toEqual([
      ['partial', day(0), 40],
      ['partial', day(1), 15],
    ]);
    // Everything back: 15 from the balance, 40 unrecovered; each day loses what it held.
    const all = { ...twoLines(1, [{ productId: 'hat', quantity: 1, price: '15.00', refundedQuantity: 1 }]), refunded: '75.00', status: 'refunded' };
    expect(await order(shop, 'P-1', 'partial', all)).toMatchObject({ pointsEarned: 0, pointsClawedBack: 75, unrecoveredPoints: 50 });
    expect(await metricDays(shop.shopId)).toEqual([
      ['partial', day(0), 0],
      ['partial', day(1), 0],
    ]);
  });

  it('a fall leaves the order\'s latest days first', async () => {
    begin();
    const shop = await tierShop(t, null, [{ name: 'Gold', threshold: '1000' }]);
    await t.customer(shop.shopId, 'lifo');
    await order(shop, 'L-1', 'lifo', twoLines(0));
    advance(clock, DAY);
    await order(shop, 'L-1', 'lifo', twoLines(0, [{ productId: 'hat', quantity: 1, price: '15.00' }]));
    // The scarf back (20): the hat's day holds 15, the first day gives the other 5.
    await order(shop, 'L-1', 'lifo', twoLines(1, [{ productId: 'hat', quantity: 1, price: '15.00' }]));
    expect(await metricDays(shop.shopId)).toEqual([
      ['lifo', day(0), 55],
      ['lifo', day(1), 0],
    ]);
  });

  it('pending points: a refund before they are available leaves the metric alone; after, it takes them out', async () => {
    begin();
    const shop = await tierShop(t, null, [{ name: 'Silver', threshold: '30' }]);
    expect((await settings(t, shop.apiKey, { pendingDays: 14 })).userErrors).toEqual([]);
    await t.customer(shop.shopId, 'waiter');
    expect(await order(shop, 'W-1', 'waiter', twoLines(0))).toMatchObject({ pointsEarned: 60, pointsPending: 60 });
    // Pending points are not in the metric yet, so taking 20 of them back changes nothing there.
    expect(await order(shop, 'W-1', 'waiter', twoLines(1))).toMatchObject({ pointsEarned: 40, pointsPending: 40 });
    expect(await metric(shop.shopId, 'waiter')).toBe(0);
    // Available 14 days later: they count from then (the day of their ledger entry, written at the
    // real time), and lift the customer at once.
    advance(clock, 14 * DAY);
    await t.app.scheduler.runDue();
    expect((await standing(t, shop.apiKey, 'waiter')).points).toBe(40);
    expect(await metric(shop.shopId, 'waiter')).toBe(40);
    expect(await tierOf(shop, 'waiter')).toBe('Silver');
    expect((await subtract(shop, 'waiter', 40)).status).toBe(200);
    advance(clock, DAY);
    const all = { ...twoLines(1), lineItems: [{ productId: 'coat', quantity: 1, price: '40.00', refundedQuantity: 1 }, { productId: 'scarf', quantity: 1, price: '20.00', refundedQuantity: 1 }], refunded: '60.00', status: 'refunded' };
    expect(await order(shop, 'W-1', 'waiter', all)).toMatchObject({ pointsEarned: 0, pointsPending: 0, unrecoveredPoints: 40 });
    expect(await metric(shop.shopId, 'waiter')).toBe(0);
    expect(await tierOf(shop, 'waiter')).toBe('Silver');
    const released = await db().selectFrom('activities').select('created_at').where('shop_id', '=', shop.shopId).where('type', '=', 'earn_points').executeTakeFirstOrThrow();
    const releaseDay = released.created_at.toISOString().slice(0, 10);
    // The order's own day (amount_spent) and the day its points counted on: 0 points each now.
    expect(await metricDays(shop.shopId)).toEqual([...new Set([day(0), releaseDay])].sort().map((d) => ['waiter', d, 0]));
    advance(clock, DAY);
    await t.app.scheduler.runDue();
    expect(await tierOf(shop, 'waiter')).toBeNull();
  });

  it('calendar_year: an order of December returned in January leaves December, so the year it bought ends too', async () => {
    const zone = 'America/New_York';
    const year = new Date().getUTCFullYear() + 1;
    begin(new Date(`${year}-12-20T17:00:00Z`));
    const shop = await tierShop(t, { window: 'calendar_year' }, [{ name: 'Gold', threshold: '50' }], zone);
    await t.customer(shop.shopId, 'december');
    await order(shop, 'D-1', 'december', oneLine('60.00'));
    expect(await tierOf(shop, 'december')).toBe('Gold');
    expect((await subtract(shop, 'december', 30)).status).toBe(200);
    // Into January: last year qualifies for this one, so the evaluations keep Gold.
    clock.moveTo(new Date(`${year + 1}-01-05T17:00:00Z`));
    await t.app.scheduler.runDue();
    expect(await tierOf(shop, 'december')).toBe('Gold');
    // Returned: 30 come back from the balance, 30 were spent; all 60 leave 20 December.
    expect(await order(shop, 'D-1', 'december', oneLine('60.00', { refunded: '60.00', status: 'refunded' }))).toMatchObject({ pointsClawedBack: 60, unrecoveredPoints: 30 });
    // This year's metric is 0, not −60, and December's is 0 too. The tier waits for the evaluation.
    expect(await metric(shop.shopId, 'december')).toBe(0);
    expect(await metricDays(shop.shopId)).toEqual([['december', `${year}-12-20`, 0]]);
    expect(await tierOf(shop, 'december')).toBe('Gold');
    clock.moveTo(new Date(`${year + 1}-01-06T17:00:00Z`));
    await t.app.scheduler.runDue();
    expect(await tierOf(shop, 'december')).toBeNull();
  });

  it('racing refunds and adds: the metric is every order\'s available points plus the adds, exactly', async () => {
    begin();
    const shop = await tierShop(t, null, [{ name: 'Gold', threshold: '100000' }]);
    await t.customer(shop.shopId, 'racer');
    const ids = Array.from({ length: 20 }, (_, i) => `RC-${i}`);
    await Promise.all(ids.map((id) => putOrder(t, shop.apiKey, id, 'racer', '60.00', twoLines(0))));
    expect((await subtract(shop, 'racer', 1000)).status).toBe(200);
    // Each order's scarf back (20 owed; the balance holds 200 of the 400), then in full, while adds race them.
    const answers = await Promise.all([
      ...ids.map((id) => putOrder(t, shop.apiKey, id, 'racer', '60.00', twoLines(1))),
      ...Array.from({ length: 10 }, () => addPoints(t, shop.apiKey, 'racer', 7)),
      ...ids.slice(0, 5).map((id) => putOrder(t, shop.apiKey, id, 'racer', '60.00', { ...twoLines(1), refunded: '60.00', status: 'refunded' })),
    ]);
    expect(answers.every((r) => r.status === 200 || r.status === 422)).toBe(true);
    const orders = await db().selectFrom('orders').selectAll().where('shop_id', '=', shop.shopId).execute();
    const available = orders.reduce((sum, o) => sum + o.points_earned - o.points_clawed_back - o.points_pending, 0);
    expect(await metric(shop.shopId, 'racer')).toBe(available + 70);
    const perOrder = await sql<{ order_id: string; points: string }>`select order_id, sum(points) as points from tier_order_points group by 1`.execute(db());
    const held = new Map(perOrder.rows.map((r) => [r.order_id, Number(r.points)]));
    for (const o of orders) expect(held.get(o.id)).toBe(o.points_earned - o.points_clawed_back - o.points_pending);
    // The balance and the ledger agree, as everywhere.
    const c = await db().selectFrom('customers').select(['id', 'points']).where('shop_id', '=', shop.shopId).executeTakeFirstOrThrow();
    const last = await db().selectFrom('activities').select('new_points').where('customer_id', '=', c.id).orderBy('seq', 'desc').limit(1).executeTakeFirstOrThrow();
    expect(c.points).toBe(last.new_points);
  });

  it('a shop\'s first tier counts history as the triggers would have kept it', async () => {
    // The same history in two shops: one keeps its metric from the start, the other from its first
    // tier at the end. The history reads the days of its ledger: REST writes and the locked path
    // date their entries by the real time, so the clock moves only before new orders (which the
    // one-statement path dates by the clock) and for the pending release.
    const history = async (shop: { shopId: string; apiKey: string }) => {
      begin();
      await t.customer(shop.shopId, 'h-1');
      await t.customer(shop.shopId, 'h-2');
      expect((await addPoints(t, shop.apiKey, 'h-2', 25)).status).toBe(200);
      await order(shop, 'H-1', 'h-1', twoLines(0));
      await order(shop, 'H-2', 'h-2', twoLines(0));
      expect((await subtract(shop, 'h-1', 55)).status).toBe(200);
      await order(shop, 'H-1', 'h-1', twoLines(1));
      await order(shop, 'H-1', 'h-1', twoLines(1, [{ productId: 'hat', quantity: 1, price: '15.00' }]));
      expect((await settings(t, shop.apiKey, { pendingDays: 3 })).userErrors).toEqual([]);
      await order(shop, 'H-3', 'h-2', oneLine('10.00'));
      advance(clock, 4 * DAY);
      await t.app.scheduler.runDue();
      expect((await settings(t, shop.apiKey, { pendingDays: 0 })).userErrors).toEqual([]);
      await order(shop, 'H-4', 'h-2', oneLine('30.00'));
      expect((await subtract(shop, 'h-2', 125)).status).toBe(200);
      await order(shop, 'H-2', 'h-2', { ...twoLines(0), refunded: '60.00', status: 'refunded' });
      await order(shop, 'H-3', 'h-2', oneLine('10.00', { refunded: '5.00', status: 'partially_refunded' }));
      await order(shop, 'H-4', 'h-2', oneLine('30.00', { refunded: '10.00', status: 'partially_refunded' }));
    };
    const kept = await tierShop(t, null, [{ name: 'Far', threshold: '100000' }]);
    await history(kept);
    const late = await tierShop(t, null, []);
    await history(late);
    expect((await createTier(t, late.apiKey, { name: 'Far', threshold: '100000' })).userErrors).toEqual([]);
    const days = await metricDays(kept.shopId);
    expect(await metricDays(late.shopId)).toEqual(days);
    // h-1: 60 less the scarf (20, of which 15 had been spent), plus the hat's 15. h-2: 25 added,
    // H-2's 60 in and out, H-3's 10 less 5 once released; H-4's 30 less 10 on its own day.
    expect(days).toEqual([
      ['h-1', day(0), 55],
      ['h-2', day(0), 30],
      ['h-2', day(4), 20],
    ]);
  });
});

describe('migration 2026_11_27_017 on a shop that keeps its metric already', () => {
  it('takes out of the metric what refunds of spent points had left in it; members keep their tiers until the evaluation', async () => {
    const pg = onPostgres ? await isolatedPostgresUrl() : undefined;
    const handle = await openDatabase(pg ? { url: pg.url, poolSize: 2 } : { dataDir: 'memory://' });
    try {
      const db = handle.db;
      // The schema as it stood before this migration, with the later one whose columns today's code
      // writes orders with (the codes', 020): the shop's history is written by today's code.
      const { rows } = await sql<{ schema: string }>`select current_schema() as schema`.execute(db);
      const migrator = (only: (name: string) => boolean, on: typeof db) =>
        new Migrator({
          db: on,
          provider: { getMigrations: async () => Object.fromEntries(Object.entries(migrations).filter(([name]) => only(name))) },
          migrationTableSchema: rows[0]!.schema,
          allowUnorderedMigrations: true,
        });
      // Under the migrators' lock, as every migrator on the suite's shared database runs.
      const { error } = await underMigrationLock(db, (conn) => migrator((name) => name < '2026_11_27_017' || name === '2026_11_27_020_code_lifecycle', conn).migrateToLatest());
      expect(error).toBeUndefined();

      const { shop } = await createShop(db, 'Migrated');
      await createEarningRule(db, shop.id, { type: 'place_order', name: 'Per dollar', earnPoint: 1, spent: '1.00' });
      await sql`update shops set tiers_on = true where id = ${shop.id}`.execute(db);
      await sql`insert into tiers (id, shop_id, name, threshold, multiplier_bp) values ('gold-' || ${shop.id}, ${shop.id}, 'Gold', 50, 10000)`.execute(db);
      for (const id of ['spender', 'saver']) await upsertCustomer(db, shop.id, { shopifyCustomerId: id, email: `${id}@example.com` });
      const paid = { currency: 'USD', subtotal: '60.00', total: '60.00', status: 'paid', lineItems: [{ productId: 'P-1', quantity: 1, price: '60.00' }] };
      await upsertOrder(db, shop.id, 'M-1', { ...paid, customerIdentifier: 'spender' });
      await upsertOrder(db, shop.id, 'M-2', { ...paid, customerIdentifier: 'saver' });
      await changePoints(db, shop.id, 'subtract', { customerIdentifier: 'spender', amount: 60 });
      const refunded = await upsertOrder(db, shop.id, 'M-1', { ...paid, customerIdentifier: 'spender', refunded: '60.00', status: 'refunded' });
      expect(refunded.order).toMatchObject({ pointsClawedBack: 60, unrecoveredPoints: 60 });
      const metric = async () => {
        const result = await sql<{ id: string; points: string; tier: string | null }>`
          select c.shopify_customer_id as id, coalesce(sum(d.points), 0) as points, m.tier_id as tier
          from customers c left join tier_metric_days d on d.customer_id = c.id left join tier_members m on m.customer_id = c.id
          where c.shop_id = ${shop.id} group by 1, 3 order by 1`.execute(db);
        return result.rows.map((r) => [r.id, Number(r.points), r.tier]);
      };
      // Before: the spent 60 never left.
      const gold = `gold-${shop.id}`;
      expect(await metric()).toEqual([
        ['saver', 60, gold],
        ['spender', 60, gold],
      ]);
      const { results } = await underMigrationLock(db, (conn) => migrator(() => true, conn).migrateToLatest());
      expect(results?.filter((r) => r.status === 'Success').map((r) => r.migrationName)).toContain('2026_11_27_017_tier_metric_refunds');
      expect(await metric()).toEqual([
        ['saver', 60, gold],
        ['spender', 0, gold],
      ]);
    } finally {
      await handle.close();
      await pg?.drop();
    }
  });
});
