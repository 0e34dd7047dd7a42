import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ActivitiesTable } from '../src/db/schema.js';
import { newId } from '../src/domain/ids.js';
import { type Insertable, Migrator } from 'kysely';
import { migrations } from '../migrations/index.js';
import { openDatabase } from '../src/db/database.js';
import { migrateToLatest } from '../src/db/migrate.js';
import { upsertCustomer } from '../src/domain/customers.js';
import { compactInsights, pointsInsights, purgeActiveMemberMarkers } from '../src/domain/insights.js';
import { changePoints } from '../src/domain/points.js';
import { createShop } from '../src/domain/shops.js';
import { movableClock, onPostgres, startTestApp, type TestApp } from './helpers.js';
import { until } from './live-helpers.js';

const TZ = 'Asia/Kolkata'; // +05:30: local days start at 18:30 UTC, on a 15-minute bucket's edge
const DAY = 86_400_000;
const clock = movableClock();
let t: TestApp;
let shop: { shopId: string; apiKey: string };
let rewardId: string;

const INSIGHTS = `query($from: DateTime!, $to: DateTime!, $interval: InsightInterval) { shop { insights(from: $from, to: $to, interval: $interval) {
  interval timezone points { at issued { orders rules manual referrals total } removedManually redeemed expired clawedBack outstanding pending activeMembers newMembers members }
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

    // Folding every bucket's stripes into one row changes no figure.
    const db = t.app.database.db;
    expect(await compactInsights(db, new Date(Date.now() + 40 * DAY), { pauseMs: 0, batchSize: 7 })).toBeGreaterThan(0);
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
    const days = await check(new Date(Date.now() - 2 * DAY), new Date(Date.now() + 3_600_000), 'day');
    expect(days.at(-1).activeMembers).toBeGreaterThanOrEqual(5);
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
      // Those two first; later ones may follow.
      expect((await migrateToLatest(db)).slice(0, 2)).toEqual(['2026_11_25_013_insight_buckets', '2026_11_25_014_program_page']);
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

  it('refuses a range backwards or too wide, as a validation error', async () => {
    const now = Date.now();
    for (const [from, to, interval] of [[now, now - DAY, 'day'], [now, now + 400 * DAY, 'day'], [now, now + 800 * 3_600_000, 'hour']] as const) {
      const res = await t.graphql(shop.apiKey, INSIGHTS, { from: new Date(from).toISOString(), to: new Date(to).toISOString(), interval });
      expect(res.errors[0].extensions.code, `${interval} ${to - from}`).toBe('validation_error');
    }
  });
});
