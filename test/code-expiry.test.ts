import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DB } from '../src/db/database.js';
import { inTransaction } from '../src/db/transaction.js';
import { endCode, lockCode, returnCodePoints } from '../src/domain/codes/index.js';
import { shopPeriods, startOfShopDay } from '../src/domain/kernel/calendar.js';
import { RETRY_DELAYS_MS } from '../src/domain/kernel/scheduling.js';
import { createPointsRedemption } from '../src/domain/rewards/redemptions.js';
import { isolatedPostgresUrl, movableClock, onPostgres, startTestApp, type TestApp, withTwoInstances } from './helpers.js';
import { until } from './live-helpers.js';

/**
 * DESIGN.md "Rewards at checkout: a code's life": a code expires at its expiresAt by the one
 * scheduler, once, whichever instance claims it, catching up after downtime; its warning goes out
 * once, the shop's codeWarningDays before, and never for a code that ended first; its points come
 * back once where the shop says so. The clock the apps' due work reads is moved; codes are issued
 * at the real now.
 */

const SECOND = 1000;
const DAY = 86_400_000;
const COST = 100;

const SETTINGS = 'mutation($input: ShopSettingsInput!) { shopSettingsUpdate(input: $input) { userErrors { code field message } } }';

type Settings = { returnPointsOnCodeExpiry?: boolean; codeWarningDays?: number; timezone?: string };

/** A shop with `settings` and a $5 reward of COST points whose codes expire as `expiry` says. */
async function codeShop(t: TestApp, settings: Settings, expiry: Record<string, unknown> = { expireDateType: 'days', expireDays: 10 }) {
  const shop = await t.shop('Codes shop');
  expect((await t.graphql(shop.apiKey, SETTINGS, { input: settings })).data.shopSettingsUpdate.userErrors).toEqual([]);
  const { pointsRedemption } = await createPointsRedemption(t.app.database.db, shop.shopId, { name: '$5 off', type: 'amount', discountPrefix: 'FIVE-', rewardValue: COST, discountValue: 5, ...expiry });
  return { ...shop, rewardId: pointsRedemption._id };
}

/** A code redeemed by `customer` (created with `points` first when new). */
async function redeem(t: TestApp, shop: { shopId: string; apiKey: string; rewardId: string }, customer: string, points = 500) {
  await t.customer(shop.shopId, customer, points);
  const res = await t.post('/rest-api/v1/pointsRedemptions', { customerIdentifier: customer, pointsAmount: COST, rewardId: shop.rewardId }, shop.apiKey);
  expect(res.status).toBe(200);
  const { discountCode } = (await res.json()) as { discountCode: string };
  return codeRow(t.app.database.db, shop.shopId, discountCode);
}

function codeRow(db: DB, shopId: string, code: string) {
  return db.selectFrom('discount_codes').selectAll().where('shop_id', '=', shopId).where('code', '=', code).executeTakeFirstOrThrow();
}

async function eventsOf(db: DB, shopId: string, type: string) {
  const rows = await db.selectFrom('outbox_events').select('data').where('shop_id', '=', shopId).where('type', '=', type).orderBy('seq').execute();
  return rows.map((r) => r.data as Record<string, unknown>);
}

/** Each customer's entries chain (every old balance the previous new one) up to the balance; returns the entries by customer. */
async function checkLedger(db: DB, shopId: string) {
  const customers = await db.selectFrom('customers').select(['id', 'shopify_customer_id', 'points']).where('shop_id', '=', shopId).execute();
  const byCustomer: Record<string, Array<{ type: string; old_points: number; new_points: number }>> = {};
  for (const c of customers) {
    const entries = await db.selectFrom('activities').select(['type', 'old_points', 'new_points']).where('customer_id', '=', c.id).orderBy('seq').execute();
    entries.forEach((e, i) => i > 0 && expect(e.old_points).toBe(entries[i - 1]!.new_points));
    expect(entries.at(-1)?.new_points ?? 0).toBe(c.points);
    byCustomer[c.shopify_customer_id!] = entries;
  }
  return byCustomer;
}

const refunds = (entries: Array<{ type: string }>) => entries.filter((e) => e.type === 'refund_redemption').length;

/** The shop's cancellation as a direct transaction: the code locked, ended, its points returned. */
function cancel(db: DB, shopId: string, code: string) {
  return inTransaction(db, async (trx) => {
    const row = await lockCode(trx, shopId, { code });
    const { row: ended, changed } = await endCode(trx, row!, { status: 'cancelled', at: new Date() });
    if (changed) await returnCodePoints(trx, ended, `Code ${code} cancelled`);
    return changed;
  });
}

/** When a code expiring at `expires` is warned, `days` before in `zone`: the start of the shop-local day `days` before its day. */
function warnAtOf(expires: Date, zone: string, days: number): Date {
  const [y, m, d] = shopPeriods(expires, zone).day.split('-').map(Number) as [number, number, number];
  return startOfShopDay(new Date(Date.UTC(y, m - 1, d - days)).toISOString().slice(0, 10), zone);
}

describe('a code expires at its expiresAt, once', () => {
  const clock = movableClock();
  let t: TestApp;
  const db = () => t.app.database.db;
  beforeAll(async () => {
    t = await startTestApp({ WORKER: 'off' }, { clock: clock.now });
  });
  afterAll(() => t?.stop());

  it('a `days` reward: not a second before, then expired with one redemptions/expired event; no points back with the setting off', async () => {
    const shop = await codeShop(t, {});
    const before = Date.now();
    const code = await redeem(t, shop, 'days');
    const expires = code.expires_at!;
    expect(expires.getTime()).toBeGreaterThanOrEqual(before + 10 * DAY);
    expect(expires.getTime()).toBeLessThanOrEqual(Date.now() + 10 * DAY);

    clock.moveTo(new Date(expires.getTime() - SECOND));
    await t.app.scheduler.runDue();
    expect((await codeRow(db(), shop.shopId, code.code)).status).toBe('issued');
    expect((await t.app.scheduler.lag()).code_expiry).toBe(0);

    clock.moveTo(new Date(expires.getTime() + 5 * SECOND));
    expect((await t.app.scheduler.lag()).code_expiry).toBeGreaterThanOrEqual(5);
    const metrics = await (await fetch(`${t.url}/metrics`)).text();
    expect(Number(/^loyalty_due_work_lag_seconds\{kind="code_expiry"\} (\S+)$/m.exec(metrics)?.[1])).toBeGreaterThanOrEqual(5);
    expect(metrics).toMatch(/^loyalty_due_work_lag_seconds\{kind="code_warnings"\} 0$/m);
    await t.app.scheduler.runDue();
    await t.app.scheduler.runDue();
    expect((await codeRow(db(), shop.shopId, code.code)).status).toBe('expired');
    const events = await eventsOf(db(), shop.shopId, 'redemptions/expired');
    expect(events).toMatchObject([{ code: code.code, status: 'expired', expiresAt: expires.toISOString(), pointsReturned: false }]);
    expect((await t.app.scheduler.lag()).code_expiry).toBe(0);
    expect(refunds((await checkLedger(db(), shop.shopId)).days!)).toBe(0);
    expect((await db().selectFrom('customers').select('points').where('shop_id', '=', shop.shopId).executeTakeFirstOrThrow()).points).toBe(500 - COST);
  });

  it('a `date` reward with returnPointsOnCodeExpiry: expires at the date, its points back once with a refund_redemption entry', async () => {
    const date = new Date(Date.now() + 2 * DAY);
    const shop = await codeShop(t, { returnPointsOnCodeExpiry: true }, { expireDateType: 'date', expireDate: date.toISOString() });
    const code = await redeem(t, shop, 'dated');
    expect(code.expires_at!.toISOString()).toBe(date.toISOString());

    clock.moveTo(new Date(date.getTime() - SECOND));
    await t.app.scheduler.runDue();
    expect((await codeRow(db(), shop.shopId, code.code)).status).toBe('issued');
    clock.moveTo(date);
    await t.app.scheduler.runDue();
    await t.app.scheduler.runDue();
    const row = await codeRow(db(), shop.shopId, code.code);
    expect(row.status).toBe('expired');
    expect(row.returned_activity_id).not.toBeNull();
    const entries = (await checkLedger(db(), shop.shopId)).dated!;
    expect(entries.map((e) => [e.type, e.old_points, e.new_points])).toEqual([
      ['update_points', 0, 500],
      ['redeem_points', 500, 400],
      ['refund_redemption', 400, 500],
    ]);
    const refunded = await db().selectFrom('activities').select(['id', 'description', 'setting_type']).where('type', '=', 'refund_redemption').where('shop_id', '=', shop.shopId).execute();
    expect(refunded).toEqual([{ id: row.returned_activity_id, description: `Code ${code.code} expired`, setting_type: 'redemption' }]);
    expect(await eventsOf(db(), shop.shopId, 'points/refunded')).toHaveLength(1);
    expect(await eventsOf(db(), shop.shopId, 'redemptions/expired')).toMatchObject([{ code: code.code }]);
  });

  it('a code that ended first (used, cancelled) does not expire; one without an expiry never does', async () => {
    const shop = await codeShop(t, { returnPointsOnCodeExpiry: true });
    const used = await redeem(t, shop, 'user');
    const cancelled = await redeem(t, shop, 'canceller');
    await inTransaction(db(), async (trx) => {
      const row = await lockCode(trx, shop.shopId, { code: used.code });
      await endCode(trx, row!, { status: 'used', at: new Date(), orderId: 'o-1', customerId: row!.customer_id });
    });
    expect(await cancel(db(), shop.shopId, cancelled.code)).toBe(true);
    const forever = await codeShop(t, {}, { expireDateType: 'none' });
    const lasting = await redeem(t, forever, 'forever');
    expect(lasting.expires_at).toBeNull();

    clock.moveTo(new Date(Date.now() + 3650 * DAY));
    await t.app.scheduler.runDue();
    expect((await codeRow(db(), shop.shopId, used.code)).status).toBe('used');
    expect((await codeRow(db(), shop.shopId, cancelled.code)).status).toBe('cancelled');
    expect((await codeRow(db(), forever.shopId, lasting.code)).status).toBe('issued');
    expect(await eventsOf(db(), shop.shopId, 'redemptions/expired')).toEqual([]);
    // The cancellation returned the points; the expiry that did not happen returned none.
    const ledger = await checkLedger(db(), shop.shopId);
    expect([refunds(ledger.user!), refunds(ledger.canceller!)]).toEqual([0, 1]);
  });
});

describe('warnings: redemptions/expiring, codeWarningDays before, once', () => {
  const clock = movableClock();
  let t: TestApp;
  const db = () => t.app.database.db;
  beforeAll(async () => {
    t = await startTestApp({ WORKER: 'off' }, { clock: clock.now });
  });
  afterAll(() => t?.stop());

  it('from the start of the shop-local day codeWarningDays before the expiry; once; then the expiry', async () => {
    const zone = 'America/New_York';
    const shop = await codeShop(t, { codeWarningDays: 3, timezone: zone });
    const code = await redeem(t, shop, 'warned');
    const cancelled = await redeem(t, shop, 'cancelled');
    const used = await redeem(t, shop, 'used');
    expect(await cancel(db(), shop.shopId, cancelled.code)).toBe(true);
    await inTransaction(db(), async (trx) => {
      const row = await lockCode(trx, shop.shopId, { code: used.code });
      await endCode(trx, row!, { status: 'used', at: new Date(), orderId: 'o-1', customerId: row!.customer_id });
    });
    const expires = code.expires_at!;
    const warnAt = warnAtOf(expires, zone, 3);
    expect(expires.getTime() - warnAt.getTime()).toBeGreaterThan(3 * DAY - 2 * SECOND);
    expect(expires.getTime() - warnAt.getTime()).toBeLessThan(4 * DAY + 2 * SECOND);
    // As points warn: the same moment by migration 008's function.
    const { rows } = await sql<{ w: Date }>`select expiry_warn_at(${expires}::timestamptz, ${zone}, 3) as w`.execute(db());
    expect(rows[0]!.w.toISOString()).toBe(warnAt.toISOString());

    clock.moveTo(new Date(warnAt.getTime() - SECOND));
    await t.app.scheduler.runDue();
    expect(await eventsOf(db(), shop.shopId, 'redemptions/expiring')).toEqual([]);
    expect((await t.app.scheduler.lag()).code_warnings).toBe(0);

    clock.moveTo(new Date(warnAt.getTime() + 10 * SECOND));
    expect((await t.app.scheduler.lag()).code_warnings).toBeGreaterThanOrEqual(10);
    await t.app.scheduler.runDue();
    await t.app.scheduler.runDue();
    expect(await eventsOf(db(), shop.shopId, 'redemptions/expiring')).toMatchObject([{ code: code.code, status: 'issued', expiresAt: expires.toISOString() }]);
    expect((await codeRow(db(), shop.shopId, code.code)).warned_at!.toISOString()).toBe(new Date(warnAt.getTime() + 10 * SECOND).toISOString());
    expect((await t.app.scheduler.lag()).code_warnings).toBe(0);

    clock.moveTo(new Date(expires.getTime() - SECOND));
    await t.app.scheduler.runDue();
    clock.moveTo(new Date(expires.getTime() + SECOND));
    await t.app.scheduler.runDue();
    expect(await eventsOf(db(), shop.shopId, 'redemptions/expiring')).toHaveLength(1);
    expect(await eventsOf(db(), shop.shopId, 'redemptions/expired')).toMatchObject([{ code: code.code }]);
  });

  it('none with 0 days; a code issued inside its warning window is warned at the next pass; one found expired is not warned', async () => {
    const silent = await codeShop(t, { codeWarningDays: 0 });
    const quiet = await redeem(t, silent, 'quiet');
    const late = await codeShop(t, { codeWarningDays: 30 }, { expireDateType: 'days', expireDays: 5 });
    const soon = await redeem(t, late, 'soon');

    clock.moveTo(new Date());
    await t.app.scheduler.runDue();
    expect(await eventsOf(db(), late.shopId, 'redemptions/expiring')).toMatchObject([{ code: soon.code }]);
    // Downtime past a code's expiry, with warnings turned on meanwhile: it expires, unwarned.
    const unwarned = await redeem(t, silent, 'unwarned');
    expect((await t.graphql(silent.apiKey, SETTINGS, { input: { codeWarningDays: 2 } })).data.shopSettingsUpdate.userErrors).toEqual([]);
    clock.moveTo(new Date(Date.now() + 11 * DAY));
    await t.app.scheduler.runDue();
    expect(await eventsOf(db(), silent.shopId, 'redemptions/expiring')).toEqual([]);
    expect((await eventsOf(db(), silent.shopId, 'redemptions/expired')).map((e) => e.code).sort()).toEqual([quiet.code, unwarned.code].sort());
    expect(await eventsOf(db(), late.shopId, 'redemptions/expiring')).toHaveLength(1);
  });
});

describe('every code fails alone', () => {
  const clock = movableClock();
  let t: TestApp;
  const db = () => t.app.database.db;
  beforeAll(async () => {
    t = await startTestApp({ WORKER: 'off' }, { clock: clock.now });
  });
  afterAll(() => t?.stop());

  it('a code whose points cannot come back (the balance at its maximum) is retried, the others expire', async () => {
    const shop = await codeShop(t, { returnPointsOnCodeExpiry: true });
    const full = await redeem(t, shop, 'full');
    const others = await Promise.all(Array.from({ length: 5 }, (_, i) => redeem(t, shop, `other-${i}`)));
    for (const amount of [1_000_000_000, 1_000_000_000, 147_483_647 - 400]) expect((await t.post('/rest-api/v1/points/add', { customerIdentifier: 'full', amount }, shop.apiKey)).status).toBe(200);

    const at = new Date(full.expires_at!.getTime() + DAY);
    clock.moveTo(at);
    await t.app.scheduler.runDue();
    expect((await codeRow(db(), shop.shopId, full.code)).status).toBe('issued');
    for (const other of others) expect((await codeRow(db(), shop.shopId, other.code)).status).toBe('expired');
    const failures = await db().selectFrom('due_work_failures').selectAll().where('kind', '=', 'code_expiry').execute();
    expect(failures).toMatchObject([{ item: full.id, shop_id: shop.shopId, attempts: 1, set_aside_at: null }]);
    expect(failures[0]!.reason).toMatch(/maximum/);
    // Waiting for its retry, it is not lag: the failure gauges count it.
    expect((await t.app.scheduler.lag()).code_expiry).toBe(0);
    expect((await t.app.scheduler.failures()).code_expiry).toEqual({ setAside: 0, retrying: 1 });

    // Room in the balance: the retry expires it and returns its points.
    expect((await t.post('/rest-api/v1/points/substract', { customerIdentifier: 'full', amount: 1000 }, shop.apiKey)).status).toBe(200);
    clock.moveTo(new Date(at.getTime() + RETRY_DELAYS_MS[0]));
    await t.app.scheduler.runDue();
    const row = await codeRow(db(), shop.shopId, full.code);
    expect(row.status).toBe('expired');
    expect(row.returned_activity_id).not.toBeNull();
    expect(await db().selectFrom('due_work_failures').selectAll().where('kind', '=', 'code_expiry').execute()).toEqual([]);
    const ledger = await checkLedger(db(), shop.shopId);
    for (const entries of Object.values(ledger)) expect(refunds(entries)).toBe(1);
    expect(await eventsOf(db(), shop.shopId, 'redemptions/expired')).toHaveLength(6);
  });

  it('expiry racing cancellations: each code ends once, its points back once, the ledger exact', async () => {
    const shop = await codeShop(t, { returnPointsOnCodeExpiry: true });
    const codes = await Promise.all(Array.from({ length: 20 }, (_, i) => redeem(t, shop, `racer-${i}`)));
    clock.moveTo(new Date(codes[0]!.expires_at!.getTime() + DAY));
    const [cancels] = await Promise.all([Promise.all(codes.map((c) => cancel(db(), shop.shopId, c.code))), t.app.scheduler.runDue(), t.app.scheduler.runDue()]);
    await t.app.scheduler.runDue();
    const rows = await Promise.all(codes.map((c) => codeRow(db(), shop.shopId, c.code)));
    rows.forEach((row, i) => expect(row.status).toBe(cancels[i] ? 'cancelled' : 'expired'));
    const ended = [...(await eventsOf(db(), shop.shopId, 'redemptions/expired')), ...(await eventsOf(db(), shop.shopId, 'redemptions/cancelled'))];
    expect(ended.map((e) => e.code).sort()).toEqual(codes.map((c) => c.code).sort());
    const ledger = await checkLedger(db(), shop.shopId);
    for (const entries of Object.values(ledger)) {
      expect(refunds(entries)).toBe(1);
      expect(entries.at(-1)!.new_points).toBe(500);
    }
  });
});

describe.runIf(onPostgres)('on PostgreSQL, two instances', () => {
  it('expire and warn each code once', async () => {
    await withTwoInstances(async (a, b, clock) => {
      const shop = await codeShop(a, { returnPointsOnCodeExpiry: true, codeWarningDays: 5 });
      const codes = await Promise.all(Array.from({ length: 60 }, (_, i) => redeem(a, shop, `c${i}`)));
      const db = a.app.database.db;
      clock.moveTo(new Date(Date.now() + 8 * DAY));
      await Promise.all([a.app.scheduler.runDue(), b.app.scheduler.runDue(), a.app.scheduler.runDue(), b.app.scheduler.runDue()]);
      expect((await eventsOf(db, shop.shopId, 'redemptions/expiring')).map((e) => e.code).sort()).toEqual(codes.map((c) => c.code).sort());
      clock.moveTo(new Date(Date.now() + 11 * DAY));
      // Cancellations race the two sweeps too.
      const [cancels] = await Promise.all([
        Promise.all(codes.slice(0, 20).map((c) => cancel(b.app.database.db, shop.shopId, c.code))),
        a.app.scheduler.runDue(),
        b.app.scheduler.runDue(),
        a.app.scheduler.runDue(),
        b.app.scheduler.runDue(),
      ]);
      const expired = await eventsOf(db, shop.shopId, 'redemptions/expired');
      const cancelled = await eventsOf(db, shop.shopId, 'redemptions/cancelled');
      expect(cancelled).toHaveLength(cancels.filter(Boolean).length);
      expect([...expired, ...cancelled].map((e) => e.code).sort()).toEqual(codes.map((c) => c.code).sort());
      const ledger = await checkLedger(db, shop.shopId);
      for (const entries of Object.values(ledger)) expect(refunds(entries)).toBe(1);
      expect(await eventsOf(db, shop.shopId, 'points/refunded')).toHaveLength(60);
      expect(await eventsOf(db, shop.shopId, 'redemptions/expiring')).toHaveLength(60);
    });
  }, 60_000);
});

describe.runIf(onPostgres)('on PostgreSQL, one code', () => {
  it('50 cancellations and four sweeps of two instances race for it: one wins, its points back once', async () => {
    await withTwoInstances(async (a, b, clock) => {
      const shop = await codeShop(a, { returnPointsOnCodeExpiry: true });
      const code = await redeem(a, shop, 'contested');
      clock.moveTo(new Date(code.expires_at!.getTime() + SECOND));
      const [cancels] = await Promise.all([
        Promise.all(Array.from({ length: 50 }, (_, i) => cancel((i % 2 ? a : b).app.database.db, shop.shopId, code.code))),
        a.app.scheduler.runDue(),
        b.app.scheduler.runDue(),
        a.app.scheduler.runDue(),
        b.app.scheduler.runDue(),
      ]);
      const db = a.app.database.db;
      const row = await codeRow(db, shop.shopId, code.code);
      const won = cancels.filter(Boolean).length;
      expect(won).toBeLessThanOrEqual(1);
      expect(row.status).toBe(won ? 'cancelled' : 'expired');
      const ended = [...(await eventsOf(db, shop.shopId, 'redemptions/expired')), ...(await eventsOf(db, shop.shopId, 'redemptions/cancelled'))];
      expect(ended).toHaveLength(1);
      expect(refunds((await checkLedger(db, shop.shopId)).contested!)).toBe(1);
      expect(await eventsOf(db, shop.shopId, 'points/refunded')).toHaveLength(1);
    });
  }, 60_000);
});

describe('after downtime', () => {
  it('a restart expires the codes that fell due while the service was down', async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'loyalty-code-expiry-'));
    const pg = onPostgres ? await isolatedPostgresUrl() : undefined;
    const env: Record<string, string> = pg ? { DATABASE_URL: pg.url } : { DATA_DIR: dir };
    const clock = movableClock();
    try {
      const first = await startTestApp(env, { clock: clock.now });
      const shop = await codeShop(first, { returnPointsOnCodeExpiry: true });
      const codes = await Promise.all(Array.from({ length: 3 }, (_, i) => redeem(first, shop, `d${i}`)));
      await first.stop();
      clock.moveTo(new Date(codes[0]!.expires_at!.getTime() + 2 * DAY));
      const second = await startTestApp(env, { clock: clock.now });
      try {
        const db = second.app.database.db;
        const statuses = () => db.selectFrom('discount_codes').select('status').where('shop_id', '=', shop.shopId).execute();
        await until(async () => (await statuses()).every((c) => c.status === 'expired'), 10_000, 'the due codes expired');
        await second.app.scheduler.runDue();
        expect(await eventsOf(db, shop.shopId, 'redemptions/expired')).toHaveLength(3);
        const ledger = await checkLedger(db, shop.shopId);
        for (const entries of Object.values(ledger)) expect(refunds(entries)).toBe(1);
      } finally {
        await second.stop();
      }
    } finally {
      await pg?.drop();
      await rm(dir, { recursive: true, force: true });
    }
    // Two starts of an embedded database on a data folder: slow on a busy machine.
  }, 120_000);
});
