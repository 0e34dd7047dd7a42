import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { nextDay, shopPeriods, startOfShopDay } from '../src/domain/kernel/calendar.js';
import { updateShopSettings } from '../src/domain/settings/shop-settings.js';
import { isolatedPostgresUrl, movableClock, onPostgres, startTestApp, type TestApp, withTwoInstances } from './helpers.js';
import { until } from './live-helpers.js';

const DAY = 86_400_000;

/** A shop in `timezone` with a birthday rule of 30 points, and customers born on the given dates. */
async function birthdayShop(t: TestApp, timezone: string, born: Record<string, string>) {
  const shop = await t.shop('Birthday shop');
  await updateShopSettings(t.app.database.db, shop.shopId, { timezone });
  for (const [id, birthday] of Object.entries(born)) {
    await t.graphql(shop.apiKey, 'mutation($input: CustomerInput!) { customerUpsert(input: $input) { created } }', { input: { shopifyCustomerId: id, email: `${id}@example.com`, birthday } });
  }
  const res = await t.graphql(shop.apiKey, 'mutation { earningRuleCreate(input: { type: birthday, name: "Happy birthday", earnPoint: 30 }) { earningRule { _id } userErrors { message } } }');
  expect(res.data.earningRuleCreate.userErrors).toEqual([]);
  return { ...shop, ruleId: res.data.earningRuleCreate.earningRule._id as string };
}

/** Each customer's points; every balance is its ledger's last entry, and each award one ledger entry. */
async function points(t: TestApp, shopId: string): Promise<Record<string, number>> {
  const db = t.app.database.db;
  const customers = await db.selectFrom('customers').select(['id', 'shopify_customer_id', 'points']).where('shop_id', '=', shopId).execute();
  const result: Record<string, number> = {};
  for (const c of customers) {
    const entries = await db.selectFrom('activities').select(['old_points', 'new_points']).where('customer_id', '=', c.id).orderBy('seq').execute();
    entries.forEach((a, i) => expect(a.old_points).toBe(i === 0 ? 0 : entries[i - 1]!.new_points));
    expect(c.points).toBe(entries.at(-1)?.new_points ?? 0);
    const awards = await db.selectFrom('rule_awards').select((eb) => eb.fn.sum<number>('points').as('n')).where('customer_id', '=', c.id).executeTakeFirstOrThrow();
    expect(Number(awards.n ?? 0)).toBe(c.points);
    result[c.shopify_customer_id!] = c.points;
  }
  return result;
}

/** `day` in `days` days from today in `timeZone`, as a birthday of someone born in 1990. */
function bornOn(daysAhead: number, timeZone: string) {
  const day = shopPeriods(new Date(Date.now() + daysAhead * DAY), timeZone).day;
  return { day, birthday: `1990${day.slice(4)}` };
}

describe('the shop-local day', () => {
  it.each([
    ['2026-03-08', 'America/New_York', '2026-03-08T05:00:00.000Z'],
    ['2026-03-09', 'America/New_York', '2026-03-09T04:00:00.000Z'],
    ['2026-11-01', 'America/New_York', '2026-11-01T04:00:00.000Z'],
    ['2026-11-02', 'America/New_York', '2026-11-02T05:00:00.000Z'],
    ['2026-03-29', 'Europe/Paris', '2026-03-28T23:00:00.000Z'],
    ['2026-03-30', 'Europe/Paris', '2026-03-29T22:00:00.000Z'],
    ['2027-01-01', 'Asia/Tokyo', '2026-12-31T15:00:00.000Z'],
    ['2028-02-29', 'UTC', '2028-02-29T00:00:00.000Z'],
    // Chile moves its clocks at midnight: 6 September 2026 begins at 01:00.
    ['2026-09-06', 'America/Santiago', '2026-09-06T04:00:00.000Z'],
    ['2026-09-07', 'America/Santiago', '2026-09-07T03:00:00.000Z'],
  ])('%s in %s begins at %s', (day, zone, start) => {
    expect(startOfShopDay(day, zone).toISOString()).toBe(start);
    expect(shopPeriods(new Date(start), zone).day).toBe(day);
    expect(shopPeriods(new Date(new Date(start).getTime() - 1), zone).day).not.toBe(day);
  });

  it.each([
    ['2026-12-31', '2027-01-01'],
    ['2028-02-28', '2028-02-29'],
    ['2027-02-28', '2027-03-01'],
  ])('the day after %s is %s', (day, next) => expect(nextDay(day)).toBe(next));
});

describe('the birthday rule runs daily in the shop\'s time zone', () => {
  const clock = movableClock();
  let t: TestApp;
  beforeAll(async () => {
    // WORKER=off: the test runs the due work itself, so it sees exactly what each pass did.
    t = await startTestApp({ WORKER: 'off' }, { clock: clock.now });
  });
  afterAll(() => t?.stop());

  it('awards on the birthday once, not the day before, after missed days too; 29 February on 28 February in common years', async () => {
    const zone = 'Asia/Tokyo';
    const soon = bornOn(3, zone);
    const shop = await birthdayShop(t, zone, { soon: soon.birthday, leap: '1992-02-29', other: '1990-07-01' });
    const dayStart = startOfShopDay(soon.day, zone);

    clock.moveTo(new Date(dayStart.getTime() - 1000));
    await t.app.scheduler.runDue();
    expect(await points(t, shop.shopId)).toEqual({ soon: 0, leap: 0, other: 0 });

    clock.moveTo(new Date(dayStart.getTime() + 1000));
    await t.app.scheduler.runDue();
    await t.app.scheduler.runDue();
    expect(await points(t, shop.shopId)).toEqual({ soon: 30, leap: 0, other: 0 });

    // The service "down" until a few days after: the days missed are done in turn.
    const feb28 = startOfShopDay('2027-02-28', zone);
    clock.moveTo(new Date(feb28.getTime() + 3 * DAY));
    await t.app.scheduler.runDue();
    expect(await points(t, shop.shopId)).toEqual({ soon: 30, leap: 30, other: 0 });

    // A leap year: 29 February itself, not the 28th.
    clock.moveTo(new Date(startOfShopDay('2028-02-29', zone).getTime() - 1000));
    await t.app.scheduler.runDue();
    expect((await points(t, shop.shopId)).leap).toBe(30);
    clock.moveTo(new Date(startOfShopDay('2028-02-29', zone).getTime() + 1000));
    await t.app.scheduler.runDue();
    expect(await points(t, shop.shopId)).toMatchObject({ leap: 60, other: 30 });
    expect((await t.app.scheduler.lag()).birthdays).toBe(0);
  });

  it('stops when the rule is deactivated and starts again from the day it is active', async () => {
    const zone = 'UTC';
    const first = bornOn(2, zone);
    const second = bornOn(5, zone);
    const shop = await birthdayShop(t, zone, { first: first.birthday, second: second.birthday });
    const setActive = (active: boolean) =>
      t.graphql(shop.apiKey, 'mutation($input: EarningRuleUpdateInput!) { earningRuleUpdate(input: $input) { userErrors { message } } }', { input: { id: shop.ruleId, active } });
    await setActive(false);
    clock.moveTo(new Date(startOfShopDay(first.day, zone).getTime() + 1000));
    await t.app.scheduler.runDue();
    expect(await points(t, shop.shopId)).toEqual({ first: 0, second: 0 });
    await setActive(true);
    clock.moveTo(new Date(startOfShopDay(second.day, zone).getTime() + 1000));
    await t.app.scheduler.runDue();
    // Activated (by the real clock) before the first birthday's day: the run starts then and catches up both.
    expect(await points(t, shop.shopId)).toEqual({ first: 30, second: 30 });
  });
});

describe.runIf(onPostgres)('two instances on one PostgreSQL database', () => {
  it('award each birthday once, whichever claims the day', async () => {
    await withTwoInstances(async (a, b, clock) => {
      const zone = 'America/New_York';
      const soon = bornOn(2, zone);
      const born = Object.fromEntries(Array.from({ length: 40 }, (_, i) => [`c${i}`, i % 2 ? soon.birthday : '1990-01-15']));
      const shop = await birthdayShop(a, zone, born);
      clock.moveTo(new Date(startOfShopDay(soon.day, zone).getTime() + 1000));
      await Promise.all([a.app.scheduler.runDue(), b.app.scheduler.runDue(), a.app.scheduler.runDue(), b.app.scheduler.runDue()]);
      const earned = await points(a, shop.shopId);
      expect(Object.entries(earned).filter(([, p]) => p !== 0).map(([id]) => id).sort()).toEqual(Object.keys(born).filter((_, i) => i % 2).sort());
      expect(Object.values(earned).filter((p) => p !== 0 && p !== 30)).toEqual([]);
    });
  });
});

describe('after downtime', () => {
  it('a restart awards the birthdays that fell due while the service was down', async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'loyalty-birthday-'));
    const pg = onPostgres ? await isolatedPostgresUrl() : undefined;
    const env: Record<string, string> = pg ? { DATABASE_URL: pg.url } : { DATA_DIR: dir };
    const clock = movableClock();
    try {
      const first = await startTestApp(env, { clock: clock.now });
      const soon = bornOn(2, 'UTC');
      const shop = await birthdayShop(first, 'UTC', { r: soon.birthday });
      await first.stop();
      clock.moveTo(new Date(startOfShopDay(soon.day, 'UTC').getTime() + 2 * DAY));
      const second = await startTestApp(env, { clock: clock.now });
      try {
        // The balance alone while the worker runs (points() reads balance and awards apart, so it could see one commit between them).
        const balance = () => second.app.database.db.selectFrom('customers').select('points').where('shop_id', '=', shop.shopId).executeTakeFirstOrThrow();
        await until(async () => (await balance()).points === 30, 10_000, 'the missed birthday awarded');
        await second.app.scheduler.runDue();
        expect(await points(second, shop.shopId)).toEqual({ r: 30 });
      } finally {
        await second.stop();
      }
    } finally {
      await pg?.drop();
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe('a birthday that is no date', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp({ WORKER: 'off' });
  });
  afterAll(() => t?.stop());

  it.each(['1990-02-31', '1990-02-30', '1991-02-29', '1990-04-31', '1990-13-01', '31/02/1990'])('%s is a validation error, and nothing is stored', async (birthday) => {
    const shop = await t.shop('Bad birthdays');
    const upsert = 'mutation($input: CustomerInput!) { customerUpsert(input: $input) { created userErrors { code field } } }';
    const res = await t.graphql(shop.apiKey, upsert, { input: { shopifyCustomerId: 'b-1', email: 'b-1@example.com', birthday } });
    expect(res.data.customerUpsert).toEqual({ created: null, userErrors: [{ code: 'validation_error', field: ['input', 'birthday'] }] });
    expect(await t.app.database.db.selectFrom('customers').select('id').where('shop_id', '=', shop.shopId).execute()).toEqual([]);
  });

  it('29 February of a leap year is a birthday', async () => {
    const shop = await t.shop('Leap birthdays');
    const upsert = 'mutation($input: CustomerInput!) { customerUpsert(input: $input) { created customer { birthday } userErrors { code } } }';
    const res = await t.graphql(shop.apiKey, upsert, { input: { shopifyCustomerId: 'leap', email: 'leap@example.com', birthday: '1992-02-29' } });
    expect(res.data.customerUpsert).toEqual({ created: true, customer: { birthday: '1992-02-29' }, userErrors: [] });
  });
});
