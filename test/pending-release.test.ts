import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { updateShopSettings } from '../src/domain/settings/shop-settings.js';
import { isolatedPostgresUrl, onPostgres, startTestApp, type TestApp } from './helpers.js';
import { until } from './live-helpers.js';

const DAY = 86_400_000;

/** A clock the test moves: the apps' due work compares with it. */
function movableClock() {
  let offset = 0;
  return { now: () => Date.now() + offset, advance: (ms: number) => (offset += ms) };
}

async function pendingShop(t: TestApp, pendingDays = 10) {
  const shop = await t.shop('Pending shop');
  await t.graphql(shop.apiKey, 'mutation { earningRuleCreate(input: { type: place_order, name: "1 pt per $1", earnPoint: 1, spent: "1.00" }) { userErrors { message } } }');
  await updateShopSettings(t.app.database.db, shop.shopId, { pendingDays });
  return shop;
}

/** A paid order of `dollars` for `customer`: earns that many points, pending. */
function putOrder(t: TestApp, apiKey: string, orderId: string, customer: string, dollars: number, status = 'paid') {
  const amount = `${dollars}.00`;
  return fetch(`${t.url}/rest-api/v1/orders/${orderId}`, {
    method: 'PUT',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${apiKey}` },
    body: JSON.stringify({ customerIdentifier: customer, currency: 'USD', subtotal: amount, total: amount, refunded: status === 'paid' ? '0' : amount, status, lineItems: [{ productId: 'p', quantity: 1, price: amount }] }),
  });
}

async function balances(t: TestApp, shopId: string) {
  return t.app.database.db.selectFrom('customers').select(['shopify_customer_id', 'points', 'pending_points']).where('shop_id', '=', shopId).orderBy('shopify_customer_id').execute();
}

/** Every customer's balance is its ledger's last entry, and each released row left one entry. */
async function checkReleasedOnce(t: TestApp, shopId: string) {
  const db = t.app.database.db;
  const wrong = await db
    .selectFrom('customers as c')
    .select('c.id')
    .where('c.shop_id', '=', shopId)
    .where((eb) => eb('c.points', '<>', eb.fn.coalesce(eb.selectFrom('activities as a').select('a.new_points').whereRef('a.customer_id', '=', 'c.id').orderBy('a.seq', 'desc').limit(1), eb.lit(0))))
    .execute();
  expect(wrong).toEqual([]);
  const released = await db.selectFrom('pending_points').select((eb) => eb.fn.countAll<number>().as('n')).where('shop_id', '=', shopId).where('released_at', 'is not', null).where('points', '>', 0).executeTakeFirstOrThrow();
  const entries = await db.selectFrom('activities').select((eb) => eb.fn.countAll<number>().as('n')).where('shop_id', '=', shopId).where('type', '=', 'earn_points').executeTakeFirstOrThrow();
  expect(Number(entries.n)).toBe(Number(released.n));
  const events = await db.selectFrom('outbox_events').select((eb) => eb.fn.countAll<number>().as('n')).where('shop_id', '=', shopId).where('type', '=', 'points/available').executeTakeFirstOrThrow();
  expect(Number(events.n)).toBe(Number(released.n));
}

describe('pending points become available', () => {
  let t: TestApp;
  const clock = movableClock();
  beforeAll(async () => {
    // WORKER=off: the test runs the due work itself, so it sees exactly what each pass did.
    t = await startTestApp({ WORKER: 'off' }, { clock: clock.now });
  });
  afterAll(() => t?.stop());

  it('on time, not before, exactly once; a row refunded to 0 leaves no ledger entry; the lag shows on /metrics', async () => {
    const shop = await pendingShop(t);
    await t.customer(shop.shopId, 'c-1');
    await t.customer(shop.shopId, 'c-2');
    expect((await putOrder(t, shop.apiKey, 'A', 'c-1', 30)).status).toBe(201);
    expect((await putOrder(t, shop.apiKey, 'B', 'c-2', 20)).status).toBe(201);
    expect((await putOrder(t, shop.apiKey, 'B', 'c-2', 20, 'refunded')).status).toBe(200);
    expect(await balances(t, shop.shopId)).toEqual([
      { shopify_customer_id: 'c-1', points: 0, pending_points: 30 },
      { shopify_customer_id: 'c-2', points: 0, pending_points: 0 },
    ]);
    expect(await t.app.scheduler.runDue()).toBe(0);
    clock.advance(10 * DAY - 60_000);
    expect(await t.app.scheduler.runDue()).toBe(0);
    clock.advance(61_000);
    const metrics = await (await fetch(`${t.url}/metrics`)).text();
    expect(Number(/loyalty_due_work_lag_seconds\{kind="pending_points"\} ([\d.]+)/.exec(metrics)?.[1])).toBeGreaterThan(0);
    expect(await t.app.scheduler.runDue()).toBe(2);
    expect(await t.app.scheduler.runDue()).toBe(0);
    expect(await balances(t, shop.shopId)).toEqual([
      { shopify_customer_id: 'c-1', points: 30, pending_points: 0 },
      { shopify_customer_id: 'c-2', points: 0, pending_points: 0 },
    ]);
    const order = await (await fetch(`${t.url}/rest-api/v1/orders/A`, { headers: { authorization: `Bearer ${shop.apiKey}` } })).json();
    expect(order.order).toMatchObject({ pointsEarned: 30, pointsPending: 0 });
    await checkReleasedOnce(t, shop.shopId);
    expect((await t.app.scheduler.lag()).pending_points).toBe(0);
  });

  it('a refund after release takes the points back from the balance', async () => {
    const shop = await pendingShop(t, 1);
    await t.customer(shop.shopId, 'c-3');
    await putOrder(t, shop.apiKey, 'C', 'c-3', 40);
    clock.advance(DAY + 1000);
    await t.app.scheduler.runDue();
    const refunded = await (await putOrder(t, shop.apiKey, 'C', 'c-3', 40, 'refunded')).json();
    expect(refunded.order).toMatchObject({ pointsEarned: 0, pointsPending: 0, pointsClawedBack: 40, unrecoveredPoints: 0 });
    expect(await balances(t, shop.shopId)).toEqual([{ shopify_customer_id: 'c-3', points: 0, pending_points: 0 }]);
  });
});

describe.runIf(onPostgres)('two instances on one PostgreSQL database', () => {
  it('release each due row once, whichever claims it, while orders keep changing', async () => {
    const pg = await isolatedPostgresUrl();
    const clock = movableClock();
    const a = await startTestApp({ DATABASE_URL: pg.url }, { clock: clock.now });
    const b = await startTestApp({ DATABASE_URL: pg.url }, { clock: clock.now });
    try {
      const shop = await pendingShop(a, 2);
      for (let i = 0; i < 20; i++) await a.customer(shop.shopId, `m-${i}`);
      const puts = Array.from({ length: 200 }, (_, i) => putOrder(i % 2 ? a : b, shop.apiKey, `M-${i}`, `m-${i % 20}`, 1 + (i % 7)));
      expect((await Promise.all(puts)).every((r) => r.status === 201)).toBe(true);
      clock.advance(2 * DAY + 1000);
      // Both instances' loops and explicit passes at once, with refunds of some orders racing them.
      const refunds = Array.from({ length: 40 }, (_, i) => putOrder(i % 2 ? b : a, shop.apiKey, `M-${i * 5}`, `m-${(i * 5) % 20}`, 1 + ((i * 5) % 7), 'refunded'));
      await Promise.all([a.app.scheduler.runDue(), b.app.scheduler.runDue(), a.app.scheduler.runDue(), b.app.scheduler.runDue(), ...refunds]);
      await until(async () => (await balances(a, shop.shopId)).every((c) => c.pending_points === 0), 20_000, 'every pending point released');
      await checkReleasedOnce(a, shop.shopId);
      const orders = await a.app.database.db.selectFrom('orders').select(['status', 'points_earned', 'points_clawed_back', 'points_pending']).where('shop_id', '=', shop.shopId).execute();
      expect(orders.every((o) => o.points_pending === 0)).toBe(true);
      const total = orders.reduce((sum, o) => sum + o.points_earned - o.points_clawed_back, 0);
      const points = (await balances(a, shop.shopId)).reduce((sum, c) => sum + c.points, 0);
      expect(points).toBe(total);
    } finally {
      await a.stop();
      await b.stop();
      await pg.drop();
    }
  });
});

describe('after downtime', () => {
  it('a restart catches up what fell due while the service was down', async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'loyalty-pending-'));
    const pg = onPostgres ? await isolatedPostgresUrl() : undefined;
    const env: Record<string, string> = pg ? { DATABASE_URL: pg.url } : { DATA_DIR: dir };
    const clock = movableClock();
    try {
      const first = await startTestApp(env, { clock: clock.now });
      const shop = await pendingShop(first, 3);
      await first.customer(shop.shopId, 'd-1');
      await putOrder(first, shop.apiKey, 'D', 'd-1', 25);
      await first.stop();
      clock.advance(3 * DAY + 1000);
      const second = await startTestApp(env, { clock: clock.now });
      try {
        await until(async () => (await balances(second, shop.shopId))[0]?.points === 25, 10_000, 'the backlog released');
        expect(await balances(second, shop.shopId)).toEqual([{ shopify_customer_id: 'd-1', points: 25, pending_points: 0 }]);
        await checkReleasedOnce(second, shop.shopId);
      } finally {
        await second.stop();
      }
    } finally {
      await pg?.drop();
      await rm(dir, { recursive: true, force: true });
    }
  });
});
