import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { shopPeriods, startOfShopDay } from '../src/domain/kernel/calendar.js';
import { createPointsRedemption } from '../src/domain/rewards/redemptions.js';
import { isolatedPostgresUrl, movableClock, onPostgres, startTestApp, type TestApp, withTwoInstances } from './helpers.js';
import { until } from './live-helpers.js';

const SECOND = 1000;

/** The day `n` days after `day` ('YYYY-MM-DD'). */
function dayPlus(day: string, n: number): string {
  const [y, m, d] = day.split('-').map(Number) as [number, number, number];
  return new Date(Date.UTC(y, m - 1, d + n)).toISOString().slice(0, 10);
}

/** When points credited now expire with `days`: the start of the shop-local day after their last one. */
function expiresFromToday(days: number, zone: string): Date {
  return startOfShopDay(dayPlus(shopPeriods(new Date(), zone).day, days + 1), zone);
}

const SETTINGS = 'mutation($input: ShopSettingsInput!) { shopSettingsUpdate(input: $input) { settings { pendingDays expiry { mode days warningDays } } userErrors { code field message } } }';

async function settings(t: TestApp, apiKey: string, input: Record<string, unknown>) {
  const res = await t.graphql(apiKey, SETTINGS, { input });
  return res.data?.shopSettingsUpdate ?? res;
}

async function expiryShop(t: TestApp, expiry: Record<string, unknown>, timezone = 'UTC') {
  const shop = await t.shop('Expiry shop');
  expect((await settings(t, shop.apiKey, { timezone, expiry })).userErrors).toEqual([]);
  return shop;
}

const pointsOp = (t: TestApp, apiKey: string, op: 'add' | 'substract' | 'update', customerIdentifier: string, amount: number) =>
  t.post(`/rest-api/v1/points/${op}`, { customerIdentifier, amount }, apiKey);

async function customerRow(t: TestApp, shopId: string, id: string) {
  return t.app.database.db.selectFrom('customers').selectAll().where('shop_id', '=', shopId).where('shopify_customer_id', '=', id).executeTakeFirstOrThrow();
}

/** The customer's live lots, soonest expiry first, and a check of the invariant: they sum to the balance. */
async function lotsOf(t: TestApp, shopId: string, id: string) {
  const c = await customerRow(t, shopId, id);
  const lots = await t.app.database.db.selectFrom('point_lots').select(['points', 'expires_at']).where('customer_id', '=', c.id).orderBy('expires_at').orderBy('id').execute();
  expect(lots.reduce((n, l) => n + l.points, 0)).toBe(c.points);
  return lots.map((l) => [l.points, l.expires_at.toISOString()] as const);
}

async function eventsOf(t: TestApp, shopId: string, type: string) {
  const rows = await t.app.database.db.selectFrom('outbox_events').select('data').where('shop_id', '=', shopId).where('type', '=', type).orderBy('seq').execute();
  return rows.map((r) => r.data as Record<string, unknown>);
}

async function nextExpiry(t: TestApp, apiKey: string, id: string) {
  const res = await t.graphql(apiKey, 'query($id: String!) { customer(identifier: $id) { points nextExpiry { points at } } }', { id });
  return res.data.customer.nextExpiry;
}

describe('when points expire: the end of the shop-local day, in SQL as in the docs', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp({ WORKER: 'off' });
  });
  afterAll(() => t?.stop());

  it.each([
    // credited at (UTC), zone, days, expires at (UTC): DST and year boundaries, leap years.
    ['2026-03-07T12:00:00Z', 'America/New_York', 1, '2026-03-09T04:00:00.000Z'],
    ['2026-10-31T12:00:00Z', 'America/New_York', 1, '2026-11-02T05:00:00.000Z'],
    ['2026-03-28T22:30:00Z', 'Europe/Paris', 1, '2026-03-29T22:00:00.000Z'],
    ['2026-12-31T14:30:00Z', 'Asia/Tokyo', 1, '2027-01-01T15:00:00.000Z'],
    ['2026-12-31T15:30:00Z', 'Asia/Tokyo', 1, '2027-01-02T15:00:00.000Z'],
    ['2026-12-30T12:00:00Z', 'Europe/Paris', 365, '2027-12-30T23:00:00.000Z'],
    ['2026-09-04T12:00:00Z', 'America/Santiago', 1, '2026-09-06T04:00:00.000Z'],
    ['2028-02-28T12:00:00Z', 'UTC', 1, '2028-03-01T00:00:00.000Z'],
    ['2027-02-28T12:00:00Z', 'UTC', 1, '2027-03-02T00:00:00.000Z'],
  ])('credited %s in %s with %i days: expires %s', async (at, zone, days, expires) => {
    const { rows } = await sql<{ e: Date }>`select expiry_at(${at}::timestamptz, ${zone}, ${days}::int) as e`.execute(t.app.database.db);
    expect(rows[0]!.e.toISOString()).toBe(expires);
    // The same as the shop-local day the JavaScript side computes (birthdays, docs).
    expect(startOfShopDay(dayPlus(shopPeriods(new Date(at), zone).day, days + 1), zone).toISOString()).toBe(expires);
  });

  it.each([
    ['2026-03-09T04:00:00Z', 'America/New_York', 2, '2026-03-07T05:00:00.000Z'],
    ['2027-01-02T15:00:00Z', 'Asia/Tokyo', 3, '2026-12-30T15:00:00.000Z'],
    ['2026-03-01T00:00:00Z', 'UTC', 0, null],
  ])('a warning of %s in %s, %i days before, is due %s', async (expires, zone, warningDays, warnAt) => {
    const { rows } = await sql<{ w: Date | null }>`select expiry_warn_at(${expires}::timestamptz, ${zone}, ${warningDays}::int) as w`.execute(t.app.database.db);
    expect(rows[0]!.w?.toISOString() ?? null).toBe(warnAt);
  });
});

describe('per_earn: lots', () => {
  const clock = movableClock();
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp({ WORKER: 'off' }, { clock: clock.now });
  });
  afterAll(() => t?.stop());

  it('every kind of debit draws the lot that expires soonest; the lots always sum to the balance', async () => {
    const zone = 'America/New_York';
    const shop = await expiryShop(t, { mode: 'per_earn', days: 300 }, zone);
    const rule = await t.graphql(shop.apiKey, 'mutation { earningRuleCreate(input: { type: place_order, name: "Per dollar", earnPoint: 1, spent: "1.00" }) { userErrors { message } } }');
    expect(rule.data.earningRuleCreate.userErrors).toEqual([]);
    const reward = (await createPointsRedemption(t.app.database.db, shop.shopId, { name: '$5 off', type: 'amount', discountPrefix: 'FIVE-', rewardValue: 50, discountValue: 5 })).pointsRedemption;
    await t.customer(shop.shopId, 'lots');
    const [a, b, c] = [300, 200, 100].map((days) => expiresFromToday(days, zone).toISOString()) as [string, string, string];

    // Three credits whose lots expire in the reverse order of their earning: days changed in between.
    expect((await pointsOp(t, shop.apiKey, 'add', 'lots', 100)).status).toBe(200);
    await settings(t, shop.apiKey, { expiry: { days: 200 } });
    expect((await pointsOp(t, shop.apiKey, 'add', 'lots', 100)).status).toBe(200);
    await settings(t, shop.apiKey, { expiry: { days: 100 } });
    const order = (status: string) =>
      fetch(`${t.url}/rest-api/v1/orders/lot-1`, {
        method: 'PUT',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${shop.apiKey}` },
        body: JSON.stringify({ customerIdentifier: 'lots', currency: 'USD', subtotal: '50.00', total: '50.00', status, lineItems: [{ productId: 'p', quantity: 1, price: '50.00' }] }),
      });
    expect((await order('paid')).status).toBe(201);
    expect(await lotsOf(t, shop.shopId, 'lots')).toEqual([[50, c], [100, b], [100, a]]);
    expect(await nextExpiry(t, shop.apiKey, 'lots')).toEqual({ points: 50, at: c });

    expect((await pointsOp(t, shop.apiKey, 'substract', 'lots', 30)).status).toBe(200);
    expect(await lotsOf(t, shop.shopId, 'lots')).toEqual([[20, c], [100, b], [100, a]]);
    expect((await pointsOp(t, shop.apiKey, 'update', 'lots', 210)).status).toBe(200);
    expect(await lotsOf(t, shop.shopId, 'lots')).toEqual([[10, c], [100, b], [100, a]]);
    const redeemed = await t.post('/rest-api/v1/pointsRedemptions', { customerIdentifier: 'lots', pointsAmount: 50, rewardId: reward._id }, shop.apiKey);
    expect(redeemed.status).toBe(200);
    expect(await lotsOf(t, shop.shopId, 'lots')).toEqual([[60, b], [100, a]]);
    // The order's points were spent already: its cancellation takes them from the soonest lot left.
    expect((await order('cancelled')).status).toBe(200);
    expect(await lotsOf(t, shop.shopId, 'lots')).toEqual([[10, b], [100, a]]);
    // A set above the balance is a credit: a lot of its own.
    expect((await pointsOp(t, shop.apiKey, 'update', 'lots', 115)).status).toBe(200);
    expect(await lotsOf(t, shop.shopId, 'lots')).toEqual([[5, c], [10, b], [100, a]]);

    // Expiry itself: the due lots go, through an expire_points entry and a points/expired event.
    clock.moveTo(new Date(new Date(c).getTime() - SECOND));
    await t.app.scheduler.runDue();
    expect(await lotsOf(t, shop.shopId, 'lots')).toEqual([[5, c], [10, b], [100, a]]);
    clock.moveTo(new Date(new Date(b).getTime() + SECOND));
    expect((await t.app.scheduler.lag()).point_expiry).toBeGreaterThan(0);
    await t.app.scheduler.runDue();
    await t.app.scheduler.runDue();
    expect(await lotsOf(t, shop.shopId, 'lots')).toEqual([[100, a]]);
    const customer = await customerRow(t, shop.shopId, 'lots');
    const expired = await t.app.database.db.selectFrom('activities').select(['type', 'setting_type', 'old_points', 'new_points']).where('customer_id', '=', customer.id).where('type', '=', 'expire_points').execute();
    expect(expired).toEqual([{ type: 'expire_points', setting_type: 'expiry', old_points: 115, new_points: 100 }]);
    expect(await eventsOf(t, shop.shopId, 'points/expired')).toMatchObject([{ type: 'expire_points', oldPoints: 115, newPoints: 100, customer: customer.id }]);
    expect((await t.app.scheduler.lag()).point_expiry).toBe(0);
    expect(await nextExpiry(t, shop.apiKey, 'lots')).toEqual({ points: 100, at: a });
  });

  it('new orders of one customer written together (one statement credits them all) are a lot each', async () => {
    const shop = await expiryShop(t, { mode: 'per_earn', days: 30 });
    const rule = await t.graphql(shop.apiKey, 'mutation { earningRuleCreate(input: { type: place_order, name: "Per dollar", earnPoint: 1, spent: "1.00" }) { userErrors { message } } }');
    expect(rule.data.earningRuleCreate.userErrors).toEqual([]);
    await t.customer(shop.shopId, 'buyer');
    const puts = Array.from({ length: 20 }, (_, i) =>
      fetch(`${t.url}/rest-api/v1/orders/batch-${i}`, {
        method: 'PUT',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${shop.apiKey}` },
        body: JSON.stringify({ customerIdentifier: 'buyer', currency: 'USD', subtotal: `${i + 1}.00`, total: `${i + 1}.00`, status: 'paid', lineItems: [{ productId: 'p', quantity: 1, price: `${i + 1}.00` }] }),
      }),
    );
    expect((await Promise.all(puts)).map((r) => r.status)).toEqual(puts.map(() => 201));
    const lots = await lotsOf(t, shop.shopId, 'buyer');
    expect(lots.map(([points]) => points).sort((x, y) => x - y)).toEqual(Array.from({ length: 20 }, (_, i) => i + 1));
  });

  it('warns once per customer per expiry date, warningDays before, with the points that will go', async () => {
    const shop = await expiryShop(t, { mode: 'per_earn', days: 10, warningDays: 3 });
    await t.customer(shop.shopId, 'w');
    await t.customer(shop.shopId, 'spent');
    await pointsOp(t, shop.apiKey, 'add', 'w', 100);
    await pointsOp(t, shop.apiKey, 'add', 'spent', 40);
    await pointsOp(t, shop.apiKey, 'substract', 'spent', 40);
    const expires = expiresFromToday(10, 'UTC');
    const warnAt = startOfShopDay(dayPlus(shopPeriods(new Date(), 'UTC').day, 11 - 3), 'UTC');

    clock.moveTo(new Date(warnAt.getTime() - SECOND));
    await t.app.scheduler.runDue();
    expect(await eventsOf(t, shop.shopId, 'points/expiring')).toEqual([]);
    clock.moveTo(new Date(warnAt.getTime() + SECOND));
    await t.app.scheduler.runDue();
    await t.app.scheduler.runDue();
    const w = await customerRow(t, shop.shopId, 'w');
    expect(await eventsOf(t, shop.shopId, 'points/expiring')).toEqual([{ customer: w.id, points: 100, expiresAt: expires.toISOString() }]);
    // More points for the same date, earned after its warning: that date was warned already.
    await pointsOp(t, shop.apiKey, 'add', 'w', 20);
    await t.app.scheduler.runDue();
    expect(await eventsOf(t, shop.shopId, 'points/expiring')).toHaveLength(1);

    clock.moveTo(new Date(expires.getTime() + SECOND));
    await t.app.scheduler.runDue();
    expect((await customerRow(t, shop.shopId, 'w')).points).toBe(0);
    expect(await eventsOf(t, shop.shopId, 'points/expired')).toMatchObject([{ customer: w.id, oldPoints: 120, newPoints: 0 }]);
    expect(await nextExpiry(t, shop.apiKey, 'w')).toBeNull();
    // The warning's record went with the date.
    expect(await t.app.database.db.selectFrom('expiry_warnings').select('customer_id').where('customer_id', '=', w.id).execute()).toEqual([]);
  });
});

describe('inactivity', () => {
  const clock = movableClock();
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp({ WORKER: 'off' }, { clock: clock.now });
  });
  afterAll(() => t?.stop());

  it('the whole balance expires days after the last points activity, and any activity moves that date', async () => {
    const zone = 'Europe/Paris';
    const shop = await expiryShop(t, { mode: 'inactivity', days: 30 }, zone);
    await t.customer(shop.shopId, 'idle');
    await t.customer(shop.shopId, 'active');
    await pointsOp(t, shop.apiKey, 'add', 'idle', 100);
    await pointsOp(t, shop.apiKey, 'add', 'active', 100);
    const at30 = expiresFromToday(30, zone);
    expect(await nextExpiry(t, shop.apiKey, 'idle')).toEqual({ points: 100, at: at30.toISOString() });
    // Days changed, then one more activity of `active`: its date moves, `idle`'s stays.
    await settings(t, shop.apiKey, { expiry: { days: 60 } });
    await pointsOp(t, shop.apiKey, 'substract', 'active', 1);
    const at60 = expiresFromToday(60, zone);
    expect(await nextExpiry(t, shop.apiKey, 'active')).toEqual({ points: 99, at: at60.toISOString() });

    clock.moveTo(new Date(at30.getTime() - SECOND));
    await t.app.scheduler.runDue();
    expect((await customerRow(t, shop.shopId, 'idle')).points).toBe(100);
    clock.moveTo(new Date(at30.getTime() + SECOND));
    await t.app.scheduler.runDue();
    await t.app.scheduler.runDue();
    expect((await customerRow(t, shop.shopId, 'idle')).points).toBe(0);
    expect((await customerRow(t, shop.shopId, 'active')).points).toBe(99);
    // The expiry is not an activity: no new date for an empty balance.
    expect(await nextExpiry(t, shop.apiKey, 'idle')).toBeNull();
    clock.moveTo(new Date(at60.getTime() + SECOND));
    await t.app.scheduler.runDue();
    expect((await customerRow(t, shop.shopId, 'active')).points).toBe(0);
    expect((await eventsOf(t, shop.shopId, 'points/expired')).map((e) => [e.oldPoints, e.newPoints, e.description])).toEqual([
      [100, 0, 'points expired after inactivity'],
      [99, 0, 'points expired after inactivity'],
    ]);
  });
});

describe('changing the mode or the days', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp({ WORKER: 'off' });
  });
  afterAll(() => t?.stop());

  it('applies from then on: a new mode starts every balance afresh, leaving one drops its lots or timers', async () => {
    const shop = await t.shop();
    await t.customer(shop.shopId, 'rich', 500);
    await t.customer(shop.shopId, 'none', 0);
    expect(await nextExpiry(t, shop.apiKey, 'rich')).toBeNull();
    expect((await settings(t, shop.apiKey, { expiry: { mode: 'per_earn', days: 90 } })).settings.expiry).toEqual({ mode: 'per_earn', days: 90, warningDays: 0 });
    expect(await lotsOf(t, shop.shopId, 'rich')).toEqual([[500, expiresFromToday(90, 'UTC').toISOString()]]);
    expect(await lotsOf(t, shop.shopId, 'none')).toEqual([]);
    // New days: the lots that exist keep their date.
    await settings(t, shop.apiKey, { expiry: { days: 10 } });
    expect(await lotsOf(t, shop.shopId, 'rich')).toEqual([[500, expiresFromToday(90, 'UTC').toISOString()]]);
    await settings(t, shop.apiKey, { expiry: { mode: 'inactivity' } });
    expect(await t.app.database.db.selectFrom('point_lots').select('id').where('shop_id', '=', shop.shopId).execute()).toEqual([]);
    expect(await nextExpiry(t, shop.apiKey, 'rich')).toEqual({ points: 500, at: expiresFromToday(10, 'UTC').toISOString() });
    expect(await nextExpiry(t, shop.apiKey, 'none')).toBeNull();
    await settings(t, shop.apiKey, { expiry: { mode: 'none' } });
    expect(await nextExpiry(t, shop.apiKey, 'rich')).toBeNull();
    expect(await t.app.database.db.selectFrom('expiry_timers').select('customer_id').where('shop_id', '=', shop.shopId).execute()).toEqual([]);
  });

  it.each([
    [{ expiry: { days: 0 } }, 'validation_error'],
    [{ expiry: { days: -5 } }, 'validation_error'],
    [{ expiry: { days: 4000 } }, 'validation_error'],
    [{ expiry: { warningDays: -1 } }, 'validation_error'],
    [{ expiry: { days: 10, warningDays: 10 } }, 'expiry_warning_too_late'],
    [{ pendingDays: 3, expiry: { mode: 'per_earn', days: 5, warningDays: 30 } }, 'expiry_warning_too_late'],
    [{ timezone: 'Mars/Olympus', expiry: { mode: 'per_earn' } }, 'validation_error'],
  ])('refuses %j with %s, changing nothing', async (input, code) => {
    const shop = await t.shop();
    await t.customer(shop.shopId, 'c', 10);
    const res = await settings(t, shop.apiKey, input);
    expect(res.userErrors[0].code).toBe(code);
    const row = await t.app.database.db.selectFrom('shops').select(['pending_days', 'expiry_mode', 'expiry_days', 'expiry_warning_days', 'timezone']).where('id', '=', shop.shopId).executeTakeFirstOrThrow();
    expect(row).toEqual({ pending_days: 0, expiry_mode: 'none', expiry_days: 365, expiry_warning_days: 0, timezone: 'UTC' });
    expect(await t.app.database.db.selectFrom('point_lots').select('id').where('shop_id', '=', shop.shopId).execute()).toEqual([]);
  });

  it('an unknown mode is a GraphQL validation error', async () => {
    const shop = await t.shop();
    const res = await t.graphql(shop.apiKey, 'mutation { shopSettingsUpdate(input: { expiry: { mode: weekly } }) { userErrors { code } } }');
    expect(res.errors[0].message).toMatch(/weekly/);
  });
});

/** A shop with `customers` customers, each with lots of 10 points expiring at three dates (days changed in between). */
async function shopWithLots(t: TestApp, customers: number) {
  const shop = await expiryShop(t, { mode: 'per_earn', days: 30 });
  const ids = Array.from({ length: customers }, (_, i) => `c${i}`);
  for (const id of ids) await t.customer(shop.shopId, id);
  for (const days of [30, 20, 10]) {
    await settings(t, shop.apiKey, { expiry: { days } });
    await Promise.all(ids.map((id) => pointsOp(t, shop.apiKey, 'add', id, 10)));
  }
  return { ...shop, ids, soonest: expiresFromToday(10, 'UTC'), next: expiresFromToday(20, 'UTC') };
}

describe.runIf(onPostgres)('on PostgreSQL, under concurrency', () => {
  it('expiry running while the same customers redeem and spend: never a negative balance, the lots always sum to it, the ledger exact', async () => {
    await withTwoInstances(async (a, b, clock) => {
      const shop = await shopWithLots(a, 20);
      clock.moveTo(new Date(shop.next.getTime() + SECOND));
      const reward = (await createPointsRedemption(a.app.database.db, shop.shopId, { name: '$1 off', type: 'amount', discountPrefix: 'ONE-', rewardValue: 7, discountValue: 1 })).pointsRedemption;
      // Each customer has 30: 20 of it due. Redemptions and subtractions of 7 race the sweeps of two instances.
      const spends = shop.ids.flatMap((id) => [
        pointsOp(a, shop.apiKey, 'substract', id, 7),
        b.post('/rest-api/v1/pointsRedemptions', { customerIdentifier: id, pointsAmount: 7, rewardId: reward._id }, shop.apiKey),
        a.post('/rest-api/v1/pointsRedemptions', { customerIdentifier: id, pointsAmount: 7, rewardId: reward._id }, shop.apiKey),
      ]);
      const [answers] = await Promise.all([Promise.all(spends), a.app.scheduler.runDue(), b.app.scheduler.runDue(), b.app.scheduler.runDue()]);
      await a.app.scheduler.runDue();
      const statuses = answers.map((r) => r.status);
      expect(statuses.filter((s) => s !== 200 && s !== 422)).toEqual([]);
      for (const id of shop.ids) {
        const lots = await lotsOf(a, shop.shopId, id);
        const c = await customerRow(a, shop.shopId, id);
        expect(c.points).toBeGreaterThanOrEqual(0);
        const entries = await a.app.database.db.selectFrom('activities').select(['type', 'old_points', 'new_points']).where('customer_id', '=', c.id).orderBy('seq').execute();
        entries.forEach((e, i) => i > 0 && expect(e.old_points).toBe(entries[i - 1]!.new_points));
        expect(entries.at(-1)!.new_points).toBe(c.points);
        // Whatever the interleaving: what was due is gone (spent or expired, once), the rest is the later lot.
        expect(entries.filter((e) => e.type === 'expire_points').length).toBeLessThanOrEqual(1);
        expect(lots.every(([, at]) => at === expiresFromToday(30, 'UTC').toISOString())).toBe(true);
        expect(c.points).toBeLessThanOrEqual(10);
        const moved = (type: string) => entries.filter((e) => e.type === type).reduce((n, e) => n + e.old_points - e.new_points, 0);
        expect(30 - moved('subtract_points') - moved('redeem_points') - moved('expire_points')).toBe(c.points);
      }
    });
  }, 60_000);

  it('two instances expire each customer\'s due lots once', async () => {
    await withTwoInstances(async (a, b, clock) => {
      const shop = await shopWithLots(a, 60);
      clock.moveTo(new Date(shop.next.getTime() + SECOND));
      await Promise.all([a.app.scheduler.runDue(), b.app.scheduler.runDue(), a.app.scheduler.runDue(), b.app.scheduler.runDue()]);
      const expired = await a.app.database.db
        .selectFrom('activities')
        .select(['customer_id', 'old_points', 'new_points'])
        .where('shop_id', '=', shop.shopId)
        .where('type', '=', 'expire_points')
        .execute();
      expect(expired).toHaveLength(60);
      expect(new Set(expired.map((e) => e.customer_id)).size).toBe(60);
      expect(expired.every((e) => e.old_points === 30 && e.new_points === 10)).toBe(true);
      expect(await eventsOf(a, shop.shopId, 'points/expired')).toHaveLength(60);
    });
  }, 60_000);

  it('a change of mode racing with writes: every balance has its lots', async () => {
    const pg = await isolatedPostgresUrl();
    const a = await startTestApp({ DATABASE_URL: pg.url, WORKER: 'off' });
    try {
      const shop = await a.shop();
      const ids = Array.from({ length: 20 }, (_, i) => `m${i}`);
      for (const id of ids) await a.customer(shop.shopId, id, 50);
      const writes = ids.flatMap((id) => [pointsOp(a, shop.apiKey, 'add', id, 5), pointsOp(a, shop.apiKey, 'substract', id, 3), pointsOp(a, shop.apiKey, 'add', id, 1)]);
      const [answers, switched] = await Promise.all([Promise.all(writes), settings(a, shop.apiKey, { expiry: { mode: 'per_earn', days: 30 } })]);
      expect(switched.userErrors).toEqual([]);
      expect(answers.map((r) => r.status).filter((s) => s !== 200)).toEqual([]);
      for (const id of ids) {
        await lotsOf(a, shop.shopId, id);
        expect((await customerRow(a, shop.shopId, id)).points).toBe(53);
      }
    } finally {
      await a.stop();
      await pg.drop();
    }
  }, 60_000);
});

describe('after downtime', () => {
  it('a restart expires the lots that fell due while the service was down', async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'loyalty-expiry-'));
    const pg = onPostgres ? await isolatedPostgresUrl() : undefined;
    const env: Record<string, string> = pg ? { DATABASE_URL: pg.url } : { DATA_DIR: dir };
    const clock = movableClock();
    try {
      const first = await startTestApp(env, { clock: clock.now });
      const shop = await shopWithLots(first, 3);
      await first.stop();
      clock.moveTo(new Date(shop.soonest.getTime() + 2 * 86_400_000));
      const second = await startTestApp(env, { clock: clock.now });
      try {
        const balances = () => second.app.database.db.selectFrom('customers').select('points').where('shop_id', '=', shop.shopId).execute();
        await until(async () => (await balances()).every((c) => c.points === 20), 10_000, 'the due lots expired');
        await second.app.scheduler.runDue();
        for (const id of shop.ids) expect(await lotsOf(second, shop.shopId, id)).toHaveLength(2);
        expect(await eventsOf(second, shop.shopId, 'points/expired')).toHaveLength(3);
      } finally {
        await second.stop();
      }
    } finally {
      await pg?.drop();
      await rm(dir, { recursive: true, force: true });
    }
  });
});
