import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type CodeEnd, endCode, lockCode } from '../src/domain/codes/index.js';
import { compactInsights, pointsInsights } from '../src/domain/insights/index.js';
import { createShop } from '../src/domain/shops/index.js';
import { inTransaction } from '../src/db/transaction.js';
import { newId } from '../src/domain/kernel/index.js';
import { onPostgres, openLoggedPglite, startTestApp, type TestApp } from './helpers.js';

// Issue 33, item 6: codes used, expired and cancelled per reward and interval, and the use rate,
// from the rollup the end trigger keeps, checked against the codes table itself: before and after
// folding, by local day (a zone whose midnight is at :15 UTC) and hour, with ends from many
// transactions at once and ends racing for one code.

const TZ = 'Asia/Kathmandu'; // +05:45: the local day starts at 18:15 UTC, on a 15-minute bucket's edge
const HOUR = 3_600_000;
const DAY = 24 * HOUR;
/** Midnight of 2031-03-11 in Kathmandu. */
const D = Date.parse('2031-03-10T18:15:00Z');

const QUERY = `query($from: DateTime!, $to: DateTime!, $interval: InsightInterval) { shop { insights(from: $from, to: $to, interval: $interval) {
  points { at date codes { issued used expired cancelled useRate } }
  rewards { rewardId name codes points used expired cancelled useRate intervals { at date issued used expired cancelled useRate } } } } }`;

type Counts = { issued: number; used: number; expired: number; cancelled: number; useRate: number | null };
type Interval = Counts & { at: string; date: string };
type Reward = { rewardId: string; name: string | null; codes: number; points: number; used: number; expired: number; cancelled: number; useRate: number | null; intervals: Interval[] };

let t: TestApp;

/** A small seeded generator: the same sequence every run. */
function random(seed: number) {
  let s = seed;
  return (n: number) => {
    s = (s * 1_103_515_245 + 12_345) % 2 ** 31;
    return s % n;
  };
}

/** A shop in TZ with rewards of three types and customers; codes are written at chosen instants, as an import writes them. */
async function codeShop(name: string, key: string) {
  const { shopId, apiKey } = await t.shop(name);
  const setup = await t.graphql(
    apiKey,
    `mutation {
      s: shopSettingsUpdate(input: { timezone: "${TZ}" }) { userErrors { code } }
      a: pointsRedemptionCreate(input: { name: "$5 off", type: amount, rewardValue: 50, discountValue: 5 }) { pointsRedemption { _id } userErrors { code } }
      p: pointsRedemptionCreate(input: { name: "10% off", type: percentage, rewardValue: 80, discountValue: 10 }) { pointsRedemption { _id } userErrors { code } }
      f: pointsRedemptionCreate(input: { name: "Free shipping", type: shipping, rewardValue: 30 }) { pointsRedemption { _id } userErrors { code } }
    }`,
  );
  expect(JSON.stringify(setup)).not.toContain('"code"');
  const rewards = [setup.data.a, setup.data.p, setup.data.f].map((r) => r.pointsRedemption._id as string);
  const customers: string[] = [];
  for (let i = 0; i < 4; i++) {
    await t.customer(shopId, `${key}-${i}`, 10_000);
    customers.push((await t.app.database.db.selectFrom('customers').select('id').where('shop_id', '=', shopId).where('shopify_customer_id', '=', `${key}-${i}`).executeTakeFirstOrThrow()).id);
  }
  const db = t.app.database.db;
  return {
    shopId,
    apiKey,
    rewards,
    customers,
    /** A code of `reward` issued at `at` (with its redeem_points entry), expiring at `expiresAt`; its id. */
    issue: (reward: number, customer: number, at: Date, expiresAt: Date | null = null) =>
      db.transaction().execute(async (trx) => {
        const customerId = customers[customer]!;
        const { points } = await trx.selectFrom('customers').select('points').where('id', '=', customerId).forUpdate().executeTakeFirstOrThrow();
        const activity = newId();
        await trx.insertInto('activities').values({ id: activity, shop_id: shopId, customer_id: customerId, type: 'redeem_points', setting_type: 'redemption', old_points: points, new_points: points - 10, created_at: at, updated_at: at }).execute();
        await trx.updateTable('customers').set({ points: points - 10 }).where('id', '=', customerId).execute();
        const id = newId();
        await trx
          .insertInto('discount_codes')
          .values({ id, shop_id: shopId, customer_id: customerId, reward_id: rewards[reward]!, activity_id: activity, code: `C-${id}`, type: ['amount', 'percentage', 'shipping'][reward]!, value: 5, points_amount: 10, expires_at: expiresAt, created_at: at })
          .execute();
        return id;
      }),
    /** Ends the code as the code's life does: locked, then ended once (false when it had ended already). */
    end: (id: string, end: CodeEnd) =>
      inTransaction(db, async (trx) => {
        const row = (await lockCode(trx, shopId, { id }))!;
        return (await endCode(trx, row, end)).changed;
      }),
  };
}

/** (used, issued) pairs to PostgreSQL's own numeric rounding: the reference for the use rates. */
async function ratesOf(pairs: Array<[number, number]>): Promise<Map<string, number | null>> {
  const { rows } = await sql<{ u: number; i: number; r: string | null }>`
    select u, i, round(u::numeric / nullif(i, 0), 4)::text as r from unnest(${pairs.map((p) => p[0])}::int[], ${pairs.map((p) => p[1])}::int[]) as x(u, i)`.execute(t.app.database.db);
  return new Map(rows.map((r) => [`${r.u}/${r.i}`, r.r === null ? null : Number(r.r)]));
}

/**
 * The insights of [from, to) against the codes table: every interval's codes, every reward's range
 * and intervals, counted here from each code's own instants (created_at; used_at, expires_at or
 * cancelled_at by its status) over the series' intervals [at, next at).
 */
async function checkAgainstCodes(shop: { shopId: string; apiKey: string }, from: Date, to: Date, interval: 'day' | 'hour') {
  const res = await t.graphql(shop.apiKey, QUERY, { from: from.toISOString(), to: to.toISOString(), interval });
  expect(res.errors).toBeUndefined();
  const { points, rewards } = res.data.shop.insights as { points: Array<{ at: string; date: string; codes: Counts }>; rewards: Reward[] };
  const codes = await t.app.database.db
    .selectFrom('discount_codes')
    .select(['reward_id', 'status', 'created_at', 'used_at', 'expires_at', 'cancelled_at'])
    .where('shop_id', '=', shop.shopId)
    .execute();
  const ended = (c: (typeof codes)[number]) => (c.status === 'used' ? c.used_at : c.status === 'expired' ? c.expires_at : c.status === 'cancelled' ? c.cancelled_at : null);
  const spans = points.map((p, i) => ({ at: p.at, date: p.date, start: Date.parse(p.at), end: i + 1 < points.length ? Date.parse(points[i + 1]!.at) : to.getTime() }));
  const count = (of: typeof codes, start: number, end: number) => {
    const within = (d: Date | null) => d !== null && d.getTime() >= start && d.getTime() < end;
    const endedAs = (status: string) => of.filter((c) => c.status === status && within(ended(c))).length;
    return { issued: of.filter((c) => within(c.created_at)).length, used: endedAs('used'), expired: endedAs('expired'), cancelled: endedAs('cancelled') };
  };
  const pairs: Array<[number, number]> = [];
  const withRate = (c: ReturnType<typeof count>) => (pairs.push([c.used, c.issued]), c);
  const moved = (c: ReturnType<typeof count>) => c.issued + c.used + c.expired + c.cancelled > 0;
  const perInterval = spans.map((s) => ({ at: s.at, date: s.date, ...withRate(count(codes, s.start, s.end)) }));
  const perReward = [...new Set(codes.map((c) => c.reward_id))].sort().flatMap((rewardId) => {
    const of = codes.filter((c) => c.reward_id === rewardId);
    const range = withRate(count(of, spans[0]!.start, to.getTime()));
    if (!moved(range)) return [];
    const intervals = spans.map((s) => ({ at: s.at, date: s.date, ...withRate(count(of, s.start, s.end)) })).filter(moved);
    return [{ rewardId, ...range, intervals }];
  });
  const rates = await ratesOf(pairs);
  const rated = <T extends { used: number; issued: number }>(c: T) => ({ ...c, useRate: rates.get(`${c.used}/${c.issued}`)! });

  expect(points.map((p) => ({ at: p.at, date: p.date, ...p.codes }))).toEqual(perInterval.map(rated));
  expect(
    [...rewards]
      .sort((a, b) => (a.rewardId < b.rewardId ? -1 : 1))
      .map(({ rewardId, codes, used, expired, cancelled, useRate, intervals }) => ({ rewardId, issued: codes, used, expired, cancelled, useRate, intervals })),
  ).toEqual(perReward.map((r) => ({ ...rated(r), intervals: r.intervals.map(rated) })));
  // Most redeemed first.
  expect(rewards.map((r) => r.codes)).toEqual([...rewards.map((r) => r.codes)].sort((a, b) => b - a));
  return { points, rewards };
}

beforeAll(async () => {
  t = await startTestApp();
});
afterAll(() => t?.stop());

describe(`code insights (${onPostgres ? 'PostgreSQL' : 'PGlite'})`, () => {
  it('codes issued, used, expired and cancelled every way, across days and hours: every figure the codes table\'s, before and after folding', async () => {
    const shop = await codeShop('Codes', 'codes');
    const other = await codeShop('Other codes', 'other'); // the same instants in another shop: never in the first one's figures
    const next = random(20_261_127);
    const at = (ms: number) => new Date(D + ms);
    const ends: Array<() => Promise<unknown>> = [];
    const sweep: string[] = []; // expired by one statement, as a sweep of due codes ends many at once
    for (const s of [shop, other]) {
      for (let i = 0; i < (s === shop ? 160 : 20); i++) {
        const created = -36 * HOUR + next(72 * HOUR);
        const after = created + next(30 * HOUR);
        const kind = next(10);
        const id = await s.issue(next(3), next(4), at(created), kind < 5 ? at(after) : kind === 9 ? at(created + 90 * DAY) : null);
        if (kind < 3) ends.push(() => s.end(id, { status: 'expired' }));
        else if (kind < 5) sweep.push(id);
        else if (kind < 7) ends.push(() => s.end(id, { status: 'used', at: at(after), orderId: `o-${i}`, customerId: s.customers[0]! }));
        else if (kind < 9) ends.push(() => s.end(id, { status: 'cancelled', at: at(after) }));
      }
    }
    // Across the day's edge: a code used a millisecond before Kathmandu's midnight, one at it.
    const edge = [await shop.issue(0, 1, at(-2 * HOUR)), await shop.issue(0, 1, at(-2 * HOUR))];
    ends.push(() => shop.end(edge[0]!, { status: 'used', at: at(-1), orderId: 'edge-1', customerId: shop.customers[1]! }));
    ends.push(() => shop.end(edge[1]!, { status: 'used', at: at(0), orderId: 'edge-2', customerId: shop.customers[1]! }));
    // Many transactions at once (on PostgreSQL, on many connections: many stripes).
    const changed = await Promise.all(ends.map((end) => end()));
    expect(changed.every(Boolean)).toBe(true);
    await t.app.database.db.updateTable('discount_codes').set({ status: 'expired' }).where('id', 'in', sweep).where('status', '=', 'issued').execute();

    const from = at(-3 * DAY);
    const to = at(3 * DAY);
    const days = await checkAgainstCodes(shop, from, to, 'day');
    expect(days.points.map((p) => p.date)).toEqual(['2031-03-08', '2031-03-09', '2031-03-10', '2031-03-11', '2031-03-12', '2031-03-13']);
    expect(days.points[3]!.at).toBe('2031-03-10T18:15:00.000Z');
    const total = (f: (c: Counts) => number) => days.points.reduce((s, p) => s + f(p.codes), 0);
    expect([total((c) => c.issued), total((c) => c.used), total((c) => c.expired), total((c) => c.cancelled)].every((n) => n > 10)).toBe(true);
    expect(days.rewards).toHaveLength(3);
    // The two edge codes: one on each side of midnight.
    const edgeDays = (await t.app.database.db.selectFrom('discount_codes').select('used_at').where('id', 'in', edge).execute()).map((r) => r.used_at!.toISOString());
    expect(edgeDays.sort()).toEqual(['2031-03-10T18:14:59.999Z', '2031-03-10T18:15:00.000Z']);
    // Hours, and a range starting inside a day (its first day rounded down to the local midnight).
    const hours = await checkAgainstCodes(shop, at(-12 * HOUR), at(12 * HOUR), 'hour');
    expect(hours.points).toHaveLength(24);
    // The last day had ends and no issue: no rate.
    expect(days.points[5]!.codes).toMatchObject({ issued: 0, useRate: null });
    expect(days.points[5]!.codes.used + days.points[5]!.codes.expired + days.points[5]!.codes.cancelled).toBeGreaterThan(0);
    const late = await checkAgainstCodes(shop, at(5 * HOUR), at(2 * DAY), 'day');
    expect(late.points[0]!.at).toBe('2031-03-10T18:15:00.000Z');
    await checkAgainstCodes(other, from, to, 'day');

    // Folding every bucket's stripes into one row changes no figure.
    const db = t.app.database.db;
    const stripes = async () => (await db.selectFrom('insight_rewards').select('stripe').distinct().where('shop_id', '=', shop.shopId).where('stripe', '>=', 0).execute()).length;
    if (onPostgres) expect(await stripes()).toBeGreaterThan(1);
    expect(await compactInsights(db, at(400 * DAY), { pauseMs: 0, batchSize: 7 })).toBeGreaterThan(0);
    expect(await stripes()).toBe(0);
    expect(await checkAgainstCodes(shop, from, to, 'day')).toEqual(days);
    expect(await checkAgainstCodes(shop, at(-12 * HOUR), at(12 * HOUR), 'hour')).toEqual(hours);
    // A code ending after its bucket was folded adds a striped row there, folded by the next run.
    const lateCode = await shop.issue(1, 2, at(-30 * HOUR));
    expect(await shop.end(lateCode, { status: 'cancelled', at: at(-29 * HOUR) })).toBe(true);
    await checkAgainstCodes(shop, from, to, 'day');
    await compactInsights(db, at(400 * DAY), { pauseMs: 0 });
    const folded = await checkAgainstCodes(shop, from, to, 'day');
    expect(folded.points.reduce((s, p) => s + p.codes.cancelled, 0)).toBe(total((c) => c.cancelled) + 1);

    // Used and issued counted over the same range: codes issued before it and used in it make a rate above 1.
    const earlier = [await shop.issue(2, 0, at(9 * DAY)), await shop.issue(2, 0, at(9 * DAY))];
    await shop.issue(2, 0, at(10 * DAY + HOUR));
    for (const [i, id] of earlier.entries()) await shop.end(id, { status: 'used', at: at(10 * DAY + 2 * HOUR), orderId: `later-${i}`, customerId: shop.customers[0]! });
    const later = await checkAgainstCodes(shop, at(10 * DAY), at(11 * DAY), 'day');
    expect(later.rewards.map((r) => [r.rewardId, r.codes, r.used, r.useRate])).toEqual([[shop.rewards[2], 1, 2, 2]]);
  });

  it('ends racing for the same codes from many transactions: each code ends once, and counts once', async () => {
    const shop = await codeShop('Racing', 'racing');
    const now = Date.now();
    // Codes issued through the redemption path itself, then given an expiry that has come (as the sweep would find them).
    const codes: string[] = [];
    for (let i = 0; i < 16; i++) {
      const res = await t.post('/rest-api/v1/pointsRedemptions', { customerIdentifier: `racing-${i % 4}`, rewardId: shop.rewards[i % 3], pointsAmount: [50, 80, 30][i % 3] }, shop.apiKey);
      expect(res.status).toBe(200);
      const { id } = await t.app.database.db.selectFrom('discount_codes').select('id').where('shop_id', '=', shop.shopId).where('code', '=', (await res.json()).discountCode).executeTakeFirstOrThrow();
      codes.push(id);
    }
    await t.app.database.db.updateTable('discount_codes').set({ expires_at: new Date(now) }).where('id', 'in', codes).execute();
    const attempts = codes.flatMap((id, i) => [
      shop.end(id, { status: 'used', at: new Date(now), orderId: `o-${i}`, customerId: shop.customers[i % 4]! }),
      shop.end(id, { status: 'cancelled', at: new Date(now) }),
      shop.end(id, { status: 'expired' }),
    ]);
    const changed = await Promise.all(attempts);
    expect(changed.filter(Boolean)).toHaveLength(codes.length);
    const { points, rewards } = await checkAgainstCodes(shop, new Date(now - DAY), new Date(now + HOUR), 'day');
    // Summed over the range's days: in Kathmandu an hour after now can be tomorrow (the day starts at 18:15 UTC).
    const sum = (pick: (c: Counts) => number) => points.reduce((s, p) => s + pick(p.codes), 0);
    expect(sum((c) => c.issued)).toBe(16);
    expect(sum((c) => c.used + c.expired + c.cancelled)).toBe(16);
    expect(rewards.map((r) => r.codes).sort()).toEqual([5, 5, 6]);
  });

  it('reads the codes per interval only when asked, once for every reward and interval', async () => {
    const statements: string[] = [];
    const db = await openLoggedPglite((q) => statements.push(q));
    try {
      const { shop } = await createShop(db, 'Lazy');
      await db.updateTable('shops').set({ timezone: TZ }).where('id', '=', shop.id).execute();
      await db.insertInto('insight_rewards').values([
        { shop_id: shop.id, reward_id: 'r1', bucket: new Date(D), stripe: 0, codes: 2, used: 1 },
        { shop_id: shop.id, reward_id: 'r2', bucket: new Date(D + HOUR), stripe: 0, codes: 1, cancelled: 1 },
      ]).execute();
      const perInterval = () => statements.filter((q) => q.includes('having sum(codes)')).length;
      const insights = await pointsInsights(db, shop.id, { from: new Date(D - DAY), to: new Date(D + DAY), interval: 'day' });
      expect(insights.rewards.map((r) => [r.rewardId, r.codes, r.used, r.cancelled, r.useRate])).toEqual([['r1', 2, 1, 0, 0.5], ['r2', 1, 0, 1, 0]]);
      expect(perInterval()).toBe(0);
      const [intervals, codes] = await Promise.all([Promise.all(insights.rewards.map((r) => r.intervals())), Promise.all(insights.points.map((p) => p.codes()))]);
      expect(perInterval()).toBe(1);
      expect(intervals.map((list) => list.map((i) => [i.date, i.issued]))).toEqual([[['2031-03-11', 2]], [['2031-03-11', 1]]]);
      expect(codes.map((c) => [c.issued, c.used, c.cancelled, c.useRate])).toEqual([[0, 0, 0, null], [3, 1, 1, 0.3333]]);
    } finally {
      await db.destroy();
    }
  });
});
