import { type Insertable, Migrator, sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migrations } from '../migrations/index.js';
import { openDatabase } from '../src/db/database.js';
import { migrateToLatest } from '../src/db/migrate.js';
import type { ActivitiesTable } from '../src/db/schema.js';
import { compactInsights, pointsInsights, purgeActiveMemberMarkers } from '../src/domain/insights/insights.js';
import { newId } from '../src/domain/kernel/ids.js';
import { changePoints } from '../src/domain/ledger/points.js';
import { upsertOrder } from '../src/domain/orders/order-writes.js';
import { createEarningRule } from '../src/domain/program/earning-rules.js';
import { upsertCustomer } from '../src/domain/program/sign-up.js';
import { updateShopSettings } from '../src/domain/settings/shop-settings.js';
import { createShop } from '../src/domain/shops/shops.js';
import { movableClock, onPostgres, startTestApp, type TestApp } from './helpers.js';
import { until } from './live-helpers.js';

const TZ = 'Asia/Kolkata'; // +05:30: local days start at 18:30 UTC, on a 15-minute bucket's edge
const DAY = 86_400_000;
const clock = movableClock();
let t: TestApp;
let shop: { shopId: string; apiKey: string };
let rewardId: string;

const INSIGHTS = `query($from: DateTime!, $to: DateTime!, $interval: InsightInterval) { shop { insights(from: $from, to: $to, interval: $interval) {
  interval timezone points { at date issued { orders rules manual referrals total } removedManually redeemed expired clawedBack outstanding pending activeMembers newMembers members }
  rewards { rewardId name type codes points discount } tiers { tierId name members } } } }`;

/** A small seeded generator: the same sequence every run. */
function random(seed: number) {
  let s = seed;
  return (n: number) => {
    s = (s * 1_103_515_245 + 12_345) % 2 ** 31;
    return s % n;
  };
}

const localKey = (at: Date, interval: 'day' | 'hour') =>
  new Intl.DateTimeFormat('en-CA', { timeZone: TZ, year: 'numeric', month: '2-digit', day: '2-digit', ...(interval === 'hour' ? { hour: '2-digit', hourCycle: 'h23' } : {}) }).format(at);

/** The reference: the same figures from the ledger itself, classified and bucketed here, in JavaScript. */
async function fromLedger(interval: 'day' | 'hour') {
  const rows = await t.app.database.db.selectFrom('activities').select(['type', 'setting_type', 'old_points', 'new_points', 'created_at']).where('shop_id', '=', shop.shopId).orderBy('seq').execute();
  const byKey = new Map<string, { orders: number; rules: number; manual: number; referrals: number; removed: number; redeemed: number; expired: number; clawedBack: number }>();
  for (const r of rows) {
    const d = r.new_points - r.old_points;
    const key = localKey(r.created_at, interval);
    const b = byKey.get(key) ?? { orders: 0, rules: 0, manual: 0, referrals: 0, removed: 0, redeemed: 0, expired: 0, clawedBack: 0 };
    byKey.set(key, b);
    if (r.type === 'earn_points') r.setting_type === 'order' ? (b.orders += d) : (b.rules += d);
    else if (r.type === 'referral_reward') b.referrals += d;
    else if (r.type === 'redeem_points') b.redeemed -= d;
    else if (r.type === 'expire_points') b.expired -= d;
    else if (r.type === 'clawback_points') b.clawedBack -= d;
    else if (d > 0) b.manual += d;
    else b.removed -= d;
  }
  // Active members: who had an entry other than an expiry, or an order's pending points, each local day.
  const db = t.app.database.db;
  const marks = [
    ...(await db.selectFrom('activities').select(['customer_id', 'created_at']).where('shop_id', '=', shop.shopId).where('type', '<>', 'expire_points').execute()),
    ...(await db.selectFrom('pending_points').select(['customer_id', 'created_at']).where('shop_id', '=', shop.shopId).execute()),
  ];
  const activeByDay = new Map<string, Set<string>>();
  for (const m of marks) {
    const day = localKey(m.created_at, 'day');
    activeByDay.set(day, (activeByDay.get(day) ?? new Set()).add(m.customer_id));
  }
  const joined = await db.selectFrom('customers').select('created_at').where('shop_id', '=', shop.shopId).execute();
  return { rows, byKey, activeByDay, joined };
}

async function check(from: Date, to: Date, interval: 'day' | 'hour') {
  const res = await t.graphql(shop.apiKey, INSIGHTS, { from: from.toISOString(), to: to.toISOString(), interval });
  expect(res.errors).toBeUndefined();
  const { points, timezone, rewards, tiers } = res.data.shop.insights;
  const db = t.app.database.db;
  // Pending now: what the customers hold as pending.
  const held = await db.selectFrom('customers').select((eb) => eb.fn.sum<string>('pending_points').as('n')).where('shop_id', '=', shop.shopId).executeTakeFirstOrThrow();
  expect(points.at(-1).pending).toBe(Number(held.n));
  // Redemptions by reward, against the codes themselves.
  const codes = await db
    .selectFrom('discount_codes')
    .select((eb) => ['reward_id', eb.fn.countAll<string>().as('codes'), eb.fn.sum<string>('points_amount').as('points'), eb.fn.sum<string>('value').as('discount')])
    .where('shop_id', '=', shop.shopId)
    .where('created_at', '>=', new Date(points[0].at))
    .where('created_at', '<', to)
    .groupBy('reward_id')
    .execute();
  expect(rewards.map((r: { rewardId: string; codes: number; points: number; discount: string }) => [r.rewardId, r.codes, r.points, Number(r.discount)])).toEqual(
    codes.map((c) => [c.reward_id, Number(c.codes), Number(c.points), Number(c.discount)]),
  );
  // Members per tier, against tier_members.
  const members = await db.selectFrom('tier_members').select((eb) => ['tier_id', eb.fn.countAll<string>().as('n')]).where('shop_id', '=', shop.shopId).where('tier_id', 'is not', null).groupBy('tier_id').execute();
  expect(tiers.map((x: { tierId: string; members: number }) => [x.tierId, x.members]).filter(([, n]: [string, number]) => n > 0)).toEqual(members.map((m) => [m.tier_id, Number(m.n)]));
  expect(timezone).toBe(TZ);
  const { rows, byKey, activeByDay, joined } = await fromLedger(interval);
  for (const [i, p] of points.entries()) {
    const at = new Date(p.at);
    const next = points[i + 1] ? new Date(points[i + 1].at) : null;
    const b = byKey.get(localKey(at, interval)) ?? { orders: 0, rules: 0, manual: 0, referrals: 0, removed: 0, redeemed: 0, expired: 0, clawedBack: 0 };
    expect(p.issued, p.at).toEqual({ orders: b.orders, rules: b.rules, manual: b.manual, referrals: b.referrals, total: b.orders + b.rules + b.manual + b.referrals });
    expect([p.removedManually, p.redeemed, p.expired, p.clawedBack], p.at).toEqual([b.removed, b.redeemed, b.expired, b.clawedBack]);
    // Outstanding: every delta before the interval's end.
    const end = next ?? to;
    const owed = rows.filter((r) => r.created_at < end && (next || localKey(r.created_at, interval) <= localKey(at, interval))).reduce((s, r) => s + r.new_points - r.old_points, 0);
    expect(p.outstanding, `outstanding ${p.at}`).toBe(owed);
    expect(p.activeMembers, `active ${p.at}`).toBe(interval === 'day' ? (activeByDay.get(localKey(at, 'day'))?.size ?? 0) : null);
    const inInterval = (d: Date) => localKey(d, interval) === localKey(at, interval);
    const before = (d: Date) => d < end && (next !== null || localKey(d, interval) <= localKey(at, interval));
    expect([p.newMembers, p.members], `members ${p.at}`).toEqual([joined.filter((c) => inInterval(c.created_at)).length, joined.filter((c) => before(c.created_at)).length]);
    // Each interval starts at a local midnight (or hour).
    expect(localKey(new Date(at.getTime() - 1), interval)).not.toBe(localKey(at, interval));
  }
  return Object.assign(points, { rewards, tiers });
}

beforeAll(async () => {
  t = await startTestApp({}, { clock: clock.now });
  shop = await t.shop('Insights shop');
  const setup = await t.graphql(
    shop.apiKey,
    `mutation {
      s: shopSettingsUpdate(input: { timezone: "${TZ}", referrerPoints: 50, refereePoints: 20, expiry: { mode: per_earn, days: 30 } }) { userErrors { code message } }
      t: tierCreate(input: { name: "Silver", threshold: "150", multiplier: "1" }) { userErrors { code message } }
      o: earningRuleCreate(input: { type: place_order, name: "1 per $1", earnPoint: 1, spent: "1.00" }) { userErrors { code message } }
      c: earningRuleCreate(input: { type: custom, name: "Review", earnPoint: 15, action: "review", actionLimit: unlimited }) { userErrors { code message } }
      r: pointsRedemptionCreate(input: { name: "$1 off", type: amount, rewardValue: 40, discountValue: 1 }) { pointsRedemption { _id } userErrors { code message } }
    }`,
  );
  expect(JSON.stringify(setup.data)).not.toContain('"code"');
  rewardId = setup.data.r.pointsRedemption._id;
  for (let i = 0; i < 6; i++) await t.customer(shop.shopId, `k-${i}`);
});
afterAll(() => t?.stop());

describe(`insights (${onPostgres ? 'PostgreSQL' : 'PGlite'})`, () => {
  it('after a random sequence of orders, refunds, redemptions, referrals, rules, manual changes and expiries, every figure equals the ledger\'s', async () => {
    const next = random(20_261_125);
    const put = (id: string, body: Record<string, unknown>) =>
      fetch(`${t.url}/rest-api/v1/orders/${id}`, { method: 'PUT', headers: { 'content-type': 'application/json', authorization: `Bearer ${shop.apiKey}` }, body: JSON.stringify(body) });
    // History first: a customer's ledger over the last 20 days at any hour (as an import of old
    // entries would write it), so the series has many days, and their prefix sums to check.
    await t.customer(shop.shopId, 'hist');
    const hist = await t.app.database.db.selectFrom('customers').select(['id', 'points']).where('shop_id', '=', shop.shopId).where('shopify_customer_id', '=', 'hist').executeTakeFirstOrThrow();
    let balance = hist.points;
    const entries: Array<Insertable<ActivitiesTable>> = [];
    for (let i = 40; i > 0; i--) {
      const delta = next(3) === 0 ? -Math.min(balance, 1 + next(30)) : 1 + next(60);
      const type = delta < 0 ? 'subtract_points' : (['add_points', 'earn_points', 'referral_reward'] as const)[next(3)] ?? 'add_points';
      entries.push({ id: newId(), shop_id: shop.shopId, customer_id: hist.id, type, setting_type: type === 'earn_points' ? 'rule' : 'api', old_points: balance, new_points: balance + delta, created_at: new Date(Date.now() - i * 12 * 3_600_000 - next(3_600_000)) });
      balance += delta;
    }
    await t.app.database.db.transaction().execute(async (trx) => {
      await trx.insertInto('activities').values(entries).execute();
      await trx.updateTable('customers').set({ points: balance }).where('id', '=', hist.id).execute();
    });
    const orders: Array<{ id: string; customer: string; total: number }> = [];
    let referees = 0;
    for (let step = 0; step < 120; step++) {
      // Half way, orders start to earn pending points (refunds of the earlier ones claw back).
      if (step === 60) await t.graphql(shop.apiKey, 'mutation { shopSettingsUpdate(input: { pendingDays: 3 }) { userErrors { code } } }');
      const customer = `k-${next(6)}`;
      const amount = 1 + next(90);
      switch (next(9)) {
        case 0:
          await t.post('/rest-api/v1/points/add', { customerIdentifier: customer, amount }, shop.apiKey);
          break;
        case 1:
          await t.post('/rest-api/v1/points/substract', { customerIdentifier: customer, amount }, shop.apiKey);
          break;
        case 2:
          await t.post('/rest-api/v1/points/update', { customerIdentifier: customer, amount: amount * 2 }, shop.apiKey);
          break;
        case 3: {
          const order = { id: `o-${step}`, customer, total: 10 + next(200) };
          orders.push(order);
          await put(order.id, { customerIdentifier: customer, currency: 'USD', subtotal: `${order.total}.00`, total: `${order.total}.00`, status: 'paid', lineItems: [{ productId: 'p', quantity: 1, price: `${order.total}.00` }] });
          break;
        }
        case 4: {
          const order = orders[next(Math.max(orders.length, 1))];
          if (!order) break;
          const full = next(3) === 0;
          await put(order.id, {
            customerIdentifier: order.customer, currency: 'USD', subtotal: `${order.total}.00`, total: `${order.total}.00`,
            refunded: full ? `${order.total}.00` : `${Math.floor(order.total / 2)}.00`, status: full ? 'refunded' : 'partially_refunded',
            lineItems: [{ productId: 'p', quantity: 1, price: `${order.total}.00` }],
          });
          break;
        }
        case 5:
          await t.post('/rest-api/v1/pointsRedemptions', { customerIdentifier: customer, rewardId, pointsAmount: 40 }, shop.apiKey);
          break;
        case 6: {
          const code = (await t.graphql(shop.apiKey, `mutation { referralCodeCreate(input: { customerIdentifier: "${customer}" }) { referralCode } }`)).data.referralCodeCreate.referralCode;
          await t.graphql(shop.apiKey, `mutation { referralRegister(input: { referralCode: "${code}", customer: { shopifyCustomerId: "ref-${referees}", email: "ref-${referees}@example.com" } }) { userErrors { code } } }`);
          referees++;
          break;
        }
        case 7:
          await t.post('/rest-api/v1/actions', { customerIdentifier: customer, action: 'review', reference: `r-${step}` }, shop.apiKey);
          break;
        default:
          await t.post('/rest-api/v1/points/add', { customerIdentifier: customer, amount: 0 }, shop.apiKey); // refused: nothing moves
      }
    }
    // While orders' points are still pending, the last figure says so.
    const held = await check(new Date(Date.now() - DAY), new Date(Date.now() + DAY), 'day');
    expect(held.at(-1).pending).toBeGreaterThan(0);
    // A month later the pending points are released and the points still held expire.
    clock.moveTo(new Date(Date.now() + 31 * DAY));
    // Until nothing is due: the server's own scheduler would otherwise change the ledger between an
    // insights query and the reference read of the ledger.
    await until(async () => {
      await t.app.scheduler.runDue();
      return Object.values(await t.app.scheduler.lag()).every((lag) => lag === 0);
    }, 30_000, 'the due work done');
    // Back to today: the credits below make lots of their own, which must not fall due meanwhile.
    clock.moveTo(new Date());
    for (let i = 0; i < 6; i++) await t.post('/rest-api/v1/points/add', { customerIdentifier: `k-${i}`, amount: 10 + i }, shop.apiKey);

    const types = await t.app.database.db.selectFrom('activities').select('type').distinct().where('shop_id', '=', shop.shopId).execute();
    expect(types.map((r) => r.type).sort()).toEqual(['add_points', 'clawback_points', 'earn_points', 'expire_points', 'redeem_points', 'referral_reward', 'subtract_points', 'update_points']);

    const from = new Date(Date.now() - 22 * DAY);
    const to = new Date(Date.now() + 33 * DAY);
    const days = await check(from, to, 'day');
    expect(days.length).toBeGreaterThanOrEqual(55);
    expect(days.filter((p: { issued: { total: number } }) => p.issued.total > 0).length).toBeGreaterThan(10);
    expect(days.some((p: { expired: number }) => p.expired > 0)).toBe(true);
    expect(days.at(-1).pending).toBe(0);
    expect(days.filter((p: { activeMembers: number }) => p.activeMembers > 0).length).toBeGreaterThan(10);
    expect(Math.max(...days.map((p: { activeMembers: number }) => p.activeMembers))).toBeGreaterThan(1);
    expect(days.at(-1).members).toBe(7 + referees);
    expect(days.rewards[0].codes).toBeGreaterThan(0);
    expect(days.tiers.map((x: { name: string; members: number }) => x.name)).toEqual(['Silver']);
    expect(days.tiers[0].members).toBeGreaterThan(0);
    // The last figure is every balance together.
    const { total } = (await t.app.database.db.selectFrom('customers').select((eb) => eb.fn.sum<string>('points').as('total')).where('shop_id', '=', shop.shopId).executeTakeFirstOrThrow());
    expect(days.at(-1).outstanding).toBe(Number(total));
    await check(new Date(Date.now() - 10 * DAY), new Date(Date.now() + 3_600_000), 'hour');

    // Folding every bucket's stripes into one row, and into days, changes no figure: two runs at
    // once (two instances' retention loops) fold each striped row once.
    const db = t.app.database.db;
    const runs = await Promise.all([7, 5].map((batchSize) => compactInsights(db, new Date(Date.now() + 40 * DAY), { pauseMs: 0, batchSize })));
    expect(runs[0]! + runs[1]!).toBeGreaterThan(0);
    const striped = await db.selectFrom('insight_buckets').select('bucket').where('stripe', '>=', 0).execute();
    expect(striped).toEqual([]);
    expect(await check(from, to, 'day')).toEqual(days);
    await check(new Date(Date.now() - 10 * DAY), new Date(Date.now() + 3_600_000), 'hour');
  });

  it('counts each customer active once a day, and each new member once, under concurrent writes of the same customers', async () => {
    const customers = ['k-0', 'k-1', 'k-2', 'c-new-1', 'c-new-2'];
    await Promise.all(
      Array.from({ length: 60 }, (_, i) => {
        const customerIdentifier = customers[i % customers.length];
        return i % 3 === 0
          ? t
              .graphql(shop.apiKey, 'mutation($input: CustomerInput!) { customerUpsert(input: $input) { userErrors { code } } }', {
                input: { shopifyCustomerId: customerIdentifier, email: `${customerIdentifier}@example.com` },
              })
              .then(() => t.post('/rest-api/v1/points/add', { customerIdentifier, amount: 1 + i }, shop.apiKey))
          : t.post('/rest-api/v1/points/add', { customerIdentifier, amount: 1 + i }, shop.apiKey);
      }),
    );
    const now = Date.now();
    const days = await check(new Date(now - 2 * DAY), new Date(now + 3_600_000), 'day');
    // Today's: within the last hour of a local day, the range ends in the next one.
    expect(days.findLast((p: { at: string }) => Date.parse(p.at) <= now).activeMembers).toBeGreaterThanOrEqual(5);
  });

  it('a database with history gets its rollups from the migration: the same figures as the ledger', async () => {
    const handle = await openDatabase({ dataDir: 'memory://' });
    try {
      const { db } = handle;
      const before = Object.fromEntries(Object.entries(migrations).filter(([name]) => name < '2026_11_25_013'));
      const { error } = await new Migrator({ db, provider: { getMigrations: async () => before } }).migrateToLatest();
      expect(error).toBeUndefined();
      const { shop } = await createShop(db, 'Old shop');
      for (const [id, amount] of [['a', 120], ['b', 45]] as const) {
        await upsertCustomer(db, shop.id, { shopifyCustomerId: id, email: `${id}@example.com` });
        await changePoints(db, shop.id, 'add', { customerIdentifier: id, amount });
        await changePoints(db, shop.id, 'subtract', { customerIdentifier: id, amount: 20 });
      }
      expect(await migrateToLatest(db)).toEqual(Object.keys(migrations).filter((name) => name >= '2026_11_25_013'));
      const now = Date.now();
      const series = await pointsInsights(db, shop.id, { from: new Date(now - DAY), to: new Date(now + DAY), interval: 'day' });
      const total = series.points.reduce((s, p) => s + p.issued.manual, 0);
      expect([total, series.points.reduce((s, p) => s + p.removedManually, 0), series.points.at(-1)!.outstanding]).toEqual([165, 40, 125]);
      // Both customers joined and were active today; the markers of today stay, so a new entry today counts no one twice.
      const today = series.points.find((p) => p.newMembers > 0)!;
      expect([today.newMembers, today.activeMembers, series.points.at(-1)!.members]).toEqual([2, 2, 2]);
      await changePoints(db, shop.id, 'add', { customerIdentifier: 'a', amount: 1 });
      const again = await pointsInsights(db, shop.id, { from: new Date(now - DAY), to: new Date(now + DAY), interval: 'day' });
      expect(again.points.find((p) => p.newMembers > 0)!.activeMembers).toBe(2);
      // The retention loop deletes markers only of days before its bound: today's two here.
      expect(await purgeActiveMemberMarkers(db, new Date(now), { pauseMs: 0 })).toBe(0);
      expect(await purgeActiveMemberMarkers(db, new Date(now + 2 * DAY), { pauseMs: 0, batchSize: 1 })).toBe(2);
    } finally {
      await handle.close();
    }
  });

  it('a database whose rollups were folded before days were kept gets its days from the migration', async () => {
    const handle = await openDatabase({ dataDir: 'memory://' });
    try {
      const { db } = handle;
      const before = Object.fromEntries(Object.entries(migrations).filter(([name]) => name < '2026_11_28_041'));
      expect((await new Migrator({ db, provider: { getMigrations: async () => before } }).migrateToLatest()).error).toBeUndefined();
      const { shop } = await createShop(db, 'Folded shop');
      await upsertCustomer(db, shop.id, { shopifyCustomerId: 'a', email: 'a@example.com' });
      await changePoints(db, shop.id, 'add', { customerIdentifier: 'a', amount: 120 });
      await changePoints(db, shop.id, 'subtract', { customerIdentifier: 'a', amount: 20 });
      // Folded as compaction did then (one connection here: one stripe per bucket).
      await sql`update insight_buckets set stripe = -1`.execute(db);
      expect(await migrateToLatest(db)).toEqual(Object.keys(migrations).filter((name) => name >= '2026_11_28_041'));
      const now = Date.now();
      for (const range of [{ from: new Date(now - DAY), to: new Date(now + DAY) }, { from: new Date(now + DAY), to: new Date(now + 2 * DAY) }]) {
        const { points } = await pointsInsights(db, shop.id, { ...range, interval: 'day' });
        const moved = [points.reduce((s, p) => s + p.issued.manual, 0), points.reduce((s, p) => s + p.removedManually, 0)];
        expect([...moved, points.at(-1)!.outstanding, points.at(-1)!.members]).toEqual(range.from.getTime() < now ? [120, 20, 100, 1] : [0, 0, 100, 1]);
      }
    } finally {
      await handle.close();
    }
  });

  it('a shop whose time zone PostgreSQL no longer knows keeps its rows striped and stalls no other shop\'s compaction', async () => {
    const db = t.app.database.db;
    const [lost, kept] = await Promise.all(['Lost zone', 'Known zone'].map(async (name) => (await createShop(db, name)).shop.id));
    for (const shopId of [lost!, kept!]) {
      await upsertCustomer(db, shopId, { shopifyCustomerId: 'z', email: 'z@example.com' });
      await changePoints(db, shopId, 'add', { customerIdentifier: 'z', amount: 40 });
    }
    // As after a tzdata upgrade that dropped the zone: nothing our API accepts sets one.
    await sql`update shops set timezone = 'Mars/Olympus' where id = ${lost!}`.execute(db);
    const striped = (shopId: string) => db.selectFrom('insight_buckets').select('bucket').where('shop_id', '=', shopId).where('stripe', '>=', 0).execute();
    await compactInsights(db, new Date(Date.now() + DAY), { pauseMs: 0, batchSize: 1 });
    expect(await striped(kept!)).toEqual([]);
    expect((await striped(lost!)).length).toBeGreaterThan(0);
    const { points } = await pointsInsights(db, kept!, { from: new Date(Date.now() - DAY), to: new Date(Date.now() + DAY), interval: 'day' });
    expect([points.reduce((s, p) => s + p.issued.manual, 0), points.at(-1)!.outstanding]).toEqual([40, 40]);
    // Its zone known again, its rows fold.
    await sql`update shops set timezone = 'UTC' where id = ${lost!}`.execute(db);
    await compactInsights(db, new Date(Date.now() + DAY), { pauseMs: 0 });
    expect(await striped(lost!)).toEqual([]);
  });

  it('refuses a range backwards or too wide, as a validation error', async () => {
    const now = Date.now();
    for (const [from, to, interval] of [[now, now - DAY, 'day'], [now, now + 400 * DAY, 'day'], [now, now + 800 * 3_600_000, 'hour']] as const) {
      const res = await t.graphql(shop.apiKey, INSIGHTS, { from: new Date(from).toISOString(), to: new Date(to).toISOString(), interval });
      expect(res.errors[0].extensions.code, `${interval} ${to - from}`).toBe('validation_error');
    }
  });
});

const HOUR = 3_600_000;
const SERIES_QUERY = `query($from: DateTime!, $to: DateTime!, $interval: InsightInterval) { shop { insights(from: $from, to: $to, interval: $interval) {
  timezone points { at date issued { orders rules manual referrals total } removedManually redeemed expired clawedBack outstanding pending activeMembers newMembers members } } } }`;

/** The instant `date` (YYYY-MM-DD) starts in `zone`, from Intl alone: the model the database's days must agree with. */
function midnight(zone: string, date: string): Date {
  const wall = new Intl.DateTimeFormat('en-CA', { timeZone: zone, hourCycle: 'h23', year: 'numeric', month: '2-digit', day: '2-digit', hour: '2-digit', minute: '2-digit' });
  // The zone's offset at an instant: its wall clock read as UTC, less the instant.
  const offset = (at: number) => {
    const p = Object.fromEntries(wall.formatToParts(at).map((x) => [x.type, Number(x.value)]));
    return Date.UTC(p.year!, p.month! - 1, p.day!, p.hour!, p.minute!) - at;
  };
  const utc = Date.parse(`${date}T00:00:00Z`);
  return new Date(utc - offset(utc - offset(utc)));
}

/** The periods of a shop's time zones, as ISO strings ('-infinity' as null). */
async function zonesOf(shopId: string) {
  const rows = await t.app.database.db
    .selectFrom('shop_timezones')
    .select(['since', 'timezone', sql<string | null>`to_char(carried_day, 'YYYY-MM-DD')`.as('carried_day'), 'carried_from', 'carried_until'])
    .where('shop_id', '=', shopId)
    .orderBy('since')
    .execute();
  const iso = (d: Date | null) => (d instanceof Date && Number.isFinite(d.getTime()) ? d.toISOString() : null);
  return rows.map((r) => ({ since: iso(r.since), timezone: r.timezone, carried_day: r.carried_day, carried_from: iso(r.carried_from), carried_until: iso(r.carried_until) }));
}

/**
 * A shop whose entries the test writes at chosen instants, as a clock moved to them would: orders
 * through the order path with its clock, manual adds and customers as an import writes them (and
 * as an entry arriving late is written: after a change, dated before it).
 */
async function shopWrittenAt(name: string) {
  const { shopId, apiKey } = await t.shop(name);
  const db = t.app.database.db;
  await createEarningRule(db, shopId, { type: 'place_order', name: '1 per $1', earnPoint: 1, spent: '1.00' });
  const customerId = (key: string) => `${shopId}-${key}`;
  return {
    shopId,
    apiKey,
    join: (key: string, at: Date) =>
      db.insertInto('customers').values({ id: customerId(key), shop_id: shopId, shopify_customer_id: key, email: `${key}@example.com`, created_at: at, updated_at: at }).execute(),
    order: (key: string, dollars: number, at: Date) =>
      upsertOrder(db, shopId, `o-${key}-${at.getTime()}`, { customerIdentifier: key, currency: 'USD', subtotal: `${dollars}.00`, total: `${dollars}.00`, status: 'paid', lineItems: [{ productId: 'p', quantity: 1, price: `${dollars}.00` }] }, at),
    add: (key: string, points: number, at: Date) =>
      db.transaction().execute(async (trx) => {
        const { points: old } = await trx.selectFrom('customers').select('points').where('id', '=', customerId(key)).forUpdate().executeTakeFirstOrThrow();
        await trx.insertInto('activities').values({ id: newId(), shop_id: shopId, customer_id: customerId(key), type: 'add_points', setting_type: 'api', old_points: old, new_points: old + points, created_at: at, updated_at: at }).execute();
        await trx.updateTable('customers').set({ points: old + points }).where('id', '=', customerId(key)).execute();
      }),
    zone: (timezone: string, at: Date) => updateShopSettings(db, shopId, { timezone }, at),
  };
}

/**
 * The series of [from, to), each interval's figures checked against the ledger over the interval's
 * own instants [at, next at): whatever the days are, every figure must be the ledger's over them,
 * and no day can have more active members than members.
 */
async function checkSeries(shop: { shopId: string; apiKey: string }, from: Date, to: Date, interval: 'day' | 'hour' = 'day') {
  const res = await t.graphql(shop.apiKey, SERIES_QUERY, { from: from.toISOString(), to: to.toISOString(), interval });
  expect(res.errors).toBeUndefined();
  const points = res.data.shop.insights.points;
  const db = t.app.database.db;
  const entries = await db.selectFrom('activities').select(['customer_id', 'type', 'setting_type', 'old_points', 'new_points', 'created_at']).where('shop_id', '=', shop.shopId).execute();
  const holds = await db.selectFrom('pending_points').select(['customer_id', 'created_at']).where('shop_id', '=', shop.shopId).execute();
  const joined = await db.selectFrom('customers').select('created_at').where('shop_id', '=', shop.shopId).execute();
  for (const [i, p] of points.entries()) {
    const start = new Date(p.at);
    const end = points[i + 1] ? new Date(points[i + 1].at) : to;
    const within = (d: Date) => d >= start && d < end;
    const moved = entries.filter((e) => within(e.created_at)).map((e) => ({ ...e, d: e.new_points - e.old_points }));
    const sum = (f: (e: (typeof moved)[number]) => boolean) => moved.filter(f).reduce((s, e) => s + e.d, 0);
    const taken = (f: (e: (typeof moved)[number]) => boolean) => moved.filter(f).reduce((s, e) => s - e.d, 0);
    const issued = {
      orders: sum((e) => e.type === 'earn_points' && e.setting_type === 'order'),
      rules: sum((e) => e.type === 'earn_points' && e.setting_type !== 'order'),
      manual: sum((e) => ['add_points', 'update_points', 'subtract_points'].includes(e.type) && e.d > 0),
      referrals: sum((e) => e.type === 'referral_reward'),
    };
    expect(p.issued, p.at).toEqual({ ...issued, total: issued.orders + issued.rules + issued.manual + issued.referrals });
    expect([p.removedManually, p.redeemed, p.expired, p.clawedBack], p.at).toEqual([
      taken((e) => ['add_points', 'update_points', 'subtract_points'].includes(e.type) && e.d < 0),
      taken((e) => e.type === 'redeem_points'),
      taken((e) => e.type === 'expire_points'),
      taken((e) => e.type === 'clawback_points'),
    ]);
    expect(p.outstanding, `outstanding ${p.at}`).toBe(entries.filter((e) => e.created_at < end).reduce((s, e) => s + e.new_points - e.old_points, 0));
    const active = new Set([...entries.filter((e) => e.type !== 'expire_points'), ...holds].filter((e) => within(e.created_at)).map((e) => e.customer_id));
    expect([p.activeMembers, p.newMembers, p.members], `members ${p.at}`).toEqual([
      interval === 'day' ? active.size : null,
      joined.filter((c) => within(c.created_at)).length,
      joined.filter((c) => c.created_at < end).length,
    ]);
    if (interval === 'day') expect(p.activeMembers, `active ${p.at}`).toBeLessThanOrEqual(p.members);
  }
  // No date twice, none going back.
  const dates = points.map((p: { date: string }) => p.date);
  if (interval === 'day') expect(dates).toEqual([...new Set(dates)].sort());
  // Folding every bucket into its day (compaction, as the retention loop does past hours) changes no figure.
  await compactInsights(db, new Date(to.getTime() + 2 * 86_400_000), { pauseMs: 0, batchSize: 3 });
  const folded = await t.graphql(shop.apiKey, SERIES_QUERY, { from: from.toISOString(), to: to.toISOString(), interval });
  expect(folded.data.shop.insights.points).toEqual(points);
  return points as Array<{ at: string; date: string; activeMembers: number; newMembers: number; members: number }>;
}

describe(`insights across a change of time zone (${onPostgres ? 'PostgreSQL' : 'PGlite'})`, () => {
  it('UTC to New York in the middle of a day: no day with more active members than members, the day of the change fully counted, every figure the ledger\'s', async () => {
    const s = await shopWrittenAt('Moved west');
    const D = Date.parse('2031-01-15T00:00:00Z'); // New York keeps UTC-5 all month
    const utc = (hours: number) => new Date(D + hours * HOUR);
    // The morning of the 15th, in UTC: two customers join and move points (New York's early morning).
    await s.join('a', utc(10));
    await s.join('b', utc(10));
    await s.order('a', 20, utc(10.5));
    await s.add('b', 5, utc(11));
    // 15:00 UTC, 10:00 in New York: the shop moves.
    await s.zone('America/New_York', utc(15));
    await s.order('a', 30, utc(16)); // a again, the same day
    await s.join('c', utc(17));
    await s.order('c', 12, utc(17.5));
    await s.add('b', 7, utc(24 + 3)); // New York's evening of the 15th
    await s.join('e', utc(8)); // written after the change, dated before it (an entry arriving late)
    await s.add('e', 9, utc(9));
    await s.order('a', 5, utc(24 + 12)); // the 16th in New York
    const days = await checkSeries(s, new Date(D - 2 * 86_400_000), utc(72 + 12));
    // The 15th runs from UTC's midnight to New York's next one (29 hours); the days after are New York's.
    const ny = (date: string) => midnight('America/New_York', date).toISOString();
    expect(days.map((p) => [p.date, p.at, p.activeMembers, p.newMembers, p.members])).toEqual([
      ['2031-01-13', '2031-01-13T00:00:00.000Z', 0, 0, 0],
      ['2031-01-14', '2031-01-14T00:00:00.000Z', 0, 0, 0],
      ['2031-01-15', '2031-01-15T00:00:00.000Z', 4, 4, 4],
      ['2031-01-16', ny('2031-01-16'), 1, 0, 4],
      ['2031-01-17', ny('2031-01-17'), 0, 0, 4],
      ['2031-01-18', ny('2031-01-18'), 0, 0, 4],
    ]);
    expect(ny('2031-01-16')).toBe('2031-01-16T05:00:00.000Z');
    // An entry arriving late in a day already folded: a striped row beside the day's.
    await s.add('b', 2, utc(12));
    expect((await checkSeries(s, new Date(D - 2 * 86_400_000), utc(72 + 12)))[2]!.activeMembers).toBe(4);
    // What the change wrote: the zone before it, and the day it carried on.
    expect(await zonesOf(s.shopId)).toEqual([
      { since: null, timezone: 'UTC', carried_day: null, carried_from: null, carried_until: null },
      { since: utc(15).toISOString(), timezone: 'America/New_York', carried_day: '2031-01-15', carried_from: utc(0).toISOString(), carried_until: ny('2031-01-16') },
    ]);
    // From inside the day of the change: it is the first day, from its start.
    expect((await checkSeries(s, utc(20), utc(72))).map((p) => p.at)).toEqual(days.slice(2, 5).map((p) => p.at));
    // Hours are hours of the zone now, over the same figures.
    await checkSeries(s, utc(-1), utc(30), 'hour');
  });

  it('New York to Tokyo late in the evening, and back the next day: the evening\'s day goes on to Tokyo\'s midnight, the skipped date never shows, every figure the ledger\'s', async () => {
    const s = await shopWrittenAt('Moved east');
    const utc = (iso: string) => new Date(`2031-02-${iso}Z`);
    // Nothing counted yet: the shop's first zone is its zone for all time, with no period.
    await s.zone('America/New_York', utc('01T00:00:00'));
    expect(await zonesOf(s.shopId)).toEqual([]);
    await s.join('h', utc('05T10:00:00'));
    await s.join('f', utc('11T02:00:00')); // 21:00 on the 10th in New York
    await s.order('f', 40, utc('11T02:30:00'));
    await s.zone('Asia/Tokyo', utc('11T03:00:00')); // 22:00 in New York, already 12:00 on the 11th in Tokyo
    await s.order('f', 15, utc('11T04:00:00')); // f again: the same day, the 10th, until Tokyo's midnight
    await s.join('g', utc('11T14:00:00'));
    await s.add('g', 3, utc('11T14:30:00'));
    await s.add('h', 4, utc('11T01:00:00')); // late: 20:00 on the 10th in New York, before the change
    await s.order('f', 25, utc('11T16:00:00')); // 01:00 on the 12th in Tokyo: a new day
    await s.zone('America/New_York', utc('12T01:00:00')); // 20:00 on the 11th in New York: the 12th goes on to its next midnight
    await s.order('f', 10, utc('12T14:00:00')); // 09:00 on the 12th in New York: the same day as Tokyo's 12th
    await s.add('g', 6, utc('13T14:00:00'));
    const days = await checkSeries(s, utc('09T00:00:00'), utc('14T12:00:00'));
    const at = (zone: string, date: string) => midnight(zone, date).toISOString();
    expect(days.map((p) => [p.date, p.at, p.activeMembers, p.newMembers, p.members])).toEqual([
      ['2031-02-08', at('America/New_York', '2031-02-08'), 0, 0, 1],
      ['2031-02-09', at('America/New_York', '2031-02-09'), 0, 0, 1],
      ['2031-02-10', at('America/New_York', '2031-02-10'), 3, 2, 3], // to 15:00 UTC on the 11th: 34 hours
      ['2031-02-12', at('Asia/Tokyo', '2031-02-12'), 1, 0, 3], // to New York's midnight of the 13th: 38 hours
      ['2031-02-13', at('America/New_York', '2031-02-13'), 1, 0, 3],
      ['2031-02-14', at('America/New_York', '2031-02-14'), 0, 0, 3],
    ]);
    // From inside the 10th, once Tokyo's: the 10th still starts at New York's midnight.
    expect((await checkSeries(s, utc('11T14:00:00'), utc('13T00:00:00'))).map((p) => p.date)).toEqual(['2031-02-10', '2031-02-12']);
    await checkSeries(s, utc('10T00:00:00'), utc('13T00:00:00'), 'hour');
  });

  it('changes of time zone racing many writes: every day is still the ledger\'s, and the day of the changes counts each customer once', async () => {
    const shop = await t.shop('Racing zones');
    for (let i = 0; i < 8; i++) await t.customer(shop.shopId, `r-${i}`);
    const zone = (timezone: string) => t.graphql(shop.apiKey, 'mutation($timezone: String!) { shopSettingsUpdate(input: { timezone: $timezone }) { userErrors { code } } }', { timezone });
    const [changes] = await Promise.all([
      (async () => {
        const answers = [];
        for (const timezone of ['America/New_York', 'Asia/Tokyo', 'Pacific/Chatham', 'UTC']) answers.push(await zone(timezone));
        return answers;
      })(),
      ...Array.from({ length: 96 }, (_, i) => t.post('/rest-api/v1/points/add', { customerIdentifier: `r-${i % 8}`, amount: 1 + i }, shop.apiKey).then((r) => expect(r.status).toBe(200))),
    ]);
    expect(changes.map((c) => c.data.shopSettingsUpdate.userErrors)).toEqual([[], [], [], []]);
    expect(await zonesOf(shop.shopId)).toHaveLength(5);
    const now = Date.now();
    const days = await checkSeries(shop, new Date(now - 3 * 86_400_000), new Date(now + 3 * 86_400_000));
    const today = days.findLast((p) => new Date(p.at).getTime() <= now)!;
    expect([today.activeMembers, today.members]).toEqual([8, 8]);
  });
  it.runIf(onPostgres)('a change of time zone waits for the shop\'s writes in flight, and starts after them', async () => {
    const s = await shopWrittenAt('In flight');
    await s.join('x', new Date(Date.now() - HOUR));
    const db = t.app.database.db;
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    let written: Date | undefined;
    const inFlight = db.transaction().execute(async (trx) => {
      written = (
        await trx
          .insertInto('activities')
          .values({ id: newId(), shop_id: s.shopId, customer_id: `${s.shopId}-x`, type: 'add_points', setting_type: 'api', old_points: 0, new_points: 1 })
          .returning('created_at')
          .executeTakeFirstOrThrow()
      ).created_at;
      await held;
    });
    await until(async () => written !== undefined, 5_000, 'the entry written');
    let changed = false;
    const change = updateShopSettings(db, s.shopId, { timezone: 'Asia/Tokyo' }).then(() => (changed = true));
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(changed).toBe(false);
    release();
    await Promise.all([inFlight, change]);
    const [, period] = await zonesOf(s.shopId);
    expect(new Date(period!.since!).getTime()).toBeGreaterThan(written!.getTime());
  });
});

describe('active-member markers of a day carried over a change of time zone', () => {
  it('stay until the day has ended, however long it runs', async () => {
    const handle = await openDatabase({ dataDir: 'memory://' });
    try {
      const { db } = handle;
      await migrateToLatest(db);
      const { shop } = await createShop(db, 'Carried shop');
      await upsertCustomer(db, shop.id, { shopifyCustomerId: 'a', email: 'a@example.com' });
      await changePoints(db, shop.id, 'add', { customerIdentifier: 'a', amount: 5 });
      // UTC to UTC-11: today (UTC) goes on until Pago Pago's next midnight, 11:00 UTC tomorrow.
      await updateShopSettings(db, shop.id, { timezone: 'Pacific/Pago_Pago' });
      const { carried_until } = await db.selectFrom('shop_timezones').select('carried_until').where('shop_id', '=', shop.id).where('carried_day', 'is not', null).executeTakeFirstOrThrow();
      expect(carried_until!.toISOString()).toMatch(/T11:00:00\.000Z$/);
      // A purge bound past the day's UTC date but before the day's end keeps its markers, then one after it deletes them.
      expect(await purgeActiveMemberMarkers(db, new Date(carried_until!.getTime() - 60_000), { pauseMs: 0 })).toBe(0);
      expect(await purgeActiveMemberMarkers(db, new Date(carried_until!.getTime() + 60_000), { pauseMs: 0 })).toBe(1);
    } finally {
      await handle.close();
    }
  });
});
