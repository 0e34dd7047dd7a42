import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createScheduler } from '../src/events/scheduler.js';
import { tierOverrideEnd } from '../src/domain/program/index.js';
import { createLogger } from '../src/logger.js';
import { cliDatabase, isolatedPostgresUrl, movableClock, onPostgres, startTestApp, type TestApp, withTwoInstances } from './helpers.js';
import { until as eventually } from './live-helpers.js';

/**
 * Issue 35, item 3: staff override a customer's tier until a date (docs/tiers.md "Overrides").
 * While it holds, the tier is the override's: orders earn by its multiplier, and neither an earn
 * nor the daily evaluation moves it. At `until` the one scheduler ends it, once across instances,
 * catching up after downtime, and the metric decides the tier again. Overrides are set at the
 * real now (GraphQL has no clock); the clock the apps' due work reads is moved past `until`.
 */

const HOUR = 3_600_000;

const OVERRIDE = `mutation($input: CustomerTierOverrideInput!) {
  customerTierOverride(input: $input) { customer { _id } tierOverride { tier { name } until reason } userErrors { code field message } }
}`;
const CLEAR = `mutation($input: CustomerTierOverrideClearInput!) {
  customerTierOverrideClear(input: $input) { customer { _id } tierOverride { until } userErrors { code field message } }
}`;
const STANDING = `query($id: String!) {
  customer(identifier: $id) { points tier { tier { name multiplier } since } tierOverride { tier { name } until reason createdAt } tierProgress { current } }
}`;

type Shop = { shopId: string; apiKey: string; tierIds: Record<string, string> };

/** A shop earning 1 point per dollar on orders, with Silver (100 points, ×1.5) and Gold (300, ×2). */
async function ladderShop(t: TestApp): Promise<Shop> {
  const shop = await t.shop('Override shop');
  const res = await t.graphql(
    shop.apiKey,
    `mutation {
      rule: earningRuleCreate(input: { type: place_order, name: "Per dollar", earnPoint: 1, spent: "1.00" }) { userErrors { message } }
      silver: tierCreate(input: { name: "Silver", threshold: "100", multiplier: "1.5" }) { tier { id } userErrors { message } }
      gold: tierCreate(input: { name: "Gold", threshold: "300", multiplier: "2" }) { tier { id } userErrors { message } }
    }`,
  );
  expect(res.errors).toBeUndefined();
  for (const field of ['rule', 'silver', 'gold']) expect(res.data[field].userErrors).toEqual([]);
  return { ...shop, tierIds: { Silver: res.data.silver.tier.id, Gold: res.data.gold.tier.id } };
}

/** A customer of the shop with `points` added (points_earned: the metric). */
async function member(t: TestApp, shop: Shop, id: string, points: number) {
  await t.customer(shop.shopId, id);
  if (points) expect((await addPoints(t, shop, id, points)).status).toBe(200);
}

const addPoints = (t: TestApp, shop: Shop, customerIdentifier: string, amount: number) => t.post('/rest-api/v1/points/add', { customerIdentifier, amount }, shop.apiKey);

async function override(t: TestApp, shop: Shop, input: Record<string, unknown>) {
  const res = await t.graphql(shop.apiKey, OVERRIDE, { input });
  expect(res.errors).toBeUndefined();
  return res.data.customerTierOverride;
}

async function clear(t: TestApp, shop: Shop, customerIdentifier: string) {
  const res = await t.graphql(shop.apiKey, CLEAR, { input: { customerIdentifier } });
  expect(res.errors).toBeUndefined();
  return res.data.customerTierOverrideClear;
}

async function standing(t: TestApp, shop: Shop, id: string) {
  const res = await t.graphql(shop.apiKey, STANDING, { id });
  expect(res.errors).toBeUndefined();
  return res.data.customer;
}

const tierName = async (t: TestApp, shop: Shop, id: string) => (await standing(t, shop, id)).tier?.tier.name ?? null;

type TierEvent = { customer: string; previousTier: { name: string } | null; tier: { name: string } | null; reason: string; until?: string };

async function tierEvents(t: TestApp, shop: Shop): Promise<TierEvent[]> {
  const rows = await t.app.database.db.selectFrom('outbox_events').select('data').where('shop_id', '=', shop.shopId).where('type', '=', 'tiers/changed').orderBy('seq').execute();
  return rows.map((r) => r.data as TierEvent);
}

async function customerId(t: TestApp, shop: Shop, shopifyId: string) {
  const row = await t.app.database.db.selectFrom('customers').select('id').where('shop_id', '=', shop.shopId).where('shopify_customer_id', '=', shopifyId).executeTakeFirstOrThrow();
  return row.id;
}

/** The tiers/changed events of one customer as [from, to, reason]. */
async function moves(t: TestApp, shop: Shop, shopifyId: string) {
  const id = await customerId(t, shop, shopifyId);
  return (await tierEvents(t, shop)).filter((e) => e.customer === id).map((e) => [e.previousTier?.name ?? null, e.tier?.name ?? null, e.reason]);
}

function putOrder(t: TestApp, shop: Shop, orderId: string, customerIdentifier: string, total: string) {
  return fetch(`${t.url}/rest-api/v1/orders/${orderId}`, {
    method: 'PUT',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${shop.apiKey}` },
    body: JSON.stringify({ customerIdentifier, currency: 'USD', subtotal: total, shipping: '0', tax: '0', total, refunded: '0', status: 'paid', lineItems: [{ productId: 'P-1', quantity: 1, price: total, discount: '0' }] }),
  });
}

const inHours = (hours: number) => new Date(Date.now() + hours * HOUR).toISOString();

describe('overriding a tier, on GraphQL and REST', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp({ WORKER: 'off' });
  });
  afterAll(() => t?.stop());

  it('up and down: the tier shows the override with its until and reason, each change one event; a clear lets the metric decide', async () => {
    const shop = await ladderShop(t);
    await member(t, shop, 'ada', 120);
    await member(t, shop, 'bob', 400);
    expect([await tierName(t, shop, 'ada'), await tierName(t, shop, 'bob')]).toEqual(['Silver', 'Gold']);

    const untilAda = inHours(24 * 7);
    const up = await override(t, shop, { customerIdentifier: 'ada', tierId: shop.tierIds.Gold, until: untilAda, reason: 'Launch event guest' });
    expect(up).toMatchObject({ userErrors: [], tierOverride: { tier: { name: 'Gold' }, until: untilAda, reason: 'Launch event guest' } });
    expect(await standing(t, shop, 'ada')).toMatchObject({
      tier: { tier: { name: 'Gold', multiplier: '2' } },
      tierOverride: { tier: { name: 'Gold' }, until: untilAda, reason: 'Launch event guest' },
      tierProgress: { current: '120' },
    });
    const down = await override(t, shop, { customerIdentifier: 'bob@example.com', tierId: null, until: inHours(48) });
    expect(down).toMatchObject({ userErrors: [], tierOverride: { tier: null, reason: null } });
    expect(await standing(t, shop, 'bob')).toMatchObject({ tier: null, tierOverride: { tier: null } });

    // REST shows the override beside the tier it holds.
    const rest = await fetch(`${t.url}/rest-api/v1/vip/tiers/customer?customerIdentifier=ada`, { headers: { authorization: `Bearer ${shop.apiKey}` } });
    expect(rest.status).toBe(200);
    expect((await rest.json()).data).toMatchObject({ tier: { name: 'Gold' }, override: { until: untilAda, reason: 'Launch event guest' }, progress: { current: '120' } });
    const plain = await fetch(`${t.url}/rest-api/v1/vip/tiers/customer?customerIdentifier=bob`, { headers: { authorization: `Bearer ${shop.apiKey}` } });
    expect((await plain.json()).data).toMatchObject({ tier: null, override: { reason: null } });

    // The same tier again is a new until, not a change of tier: no event.
    const later = inHours(24 * 14);
    expect(await override(t, shop, { customerIdentifier: 'ada', tierId: shop.tierIds.Gold, until: later, reason: '  ' })).toMatchObject({ userErrors: [], tierOverride: { until: later, reason: null } });

    // Cleared: each takes what the metric reaches now, up or down.
    expect(await clear(t, shop, 'ada')).toMatchObject({ userErrors: [], tierOverride: null });
    expect(await clear(t, shop, 'bob')).toMatchObject({ userErrors: [], tierOverride: null });
    expect(await standing(t, shop, 'ada')).toMatchObject({ tier: { tier: { name: 'Silver' } }, tierOverride: null });
    expect(await standing(t, shop, 'bob')).toMatchObject({ tier: { tier: { name: 'Gold' } }, tierOverride: null });
    const second = await clear(t, shop, 'ada');
    expect(second).toMatchObject({ customer: null, userErrors: [{ code: 'tier_override_not_found' }] });
    const again = await fetch(`${t.url}/rest-api/v1/vip/tiers/customer?customerIdentifier=ada`, { headers: { authorization: `Bearer ${shop.apiKey}` } });
    expect((await again.json()).data.override).toBeNull();

    expect(await moves(t, shop, 'ada')).toEqual([
      [null, 'Silver', 'upgrade'],
      ['Silver', 'Gold', 'override'],
      ['Gold', 'Silver', 'override_cleared'],
    ]);
    expect(await moves(t, shop, 'bob')).toEqual([
      [null, 'Gold', 'upgrade'],
      ['Gold', null, 'override'],
      [null, 'Gold', 'override_cleared'],
    ]);
    const events = await tierEvents(t, shop);
    expect(events.find((e) => e.reason === 'override' && e.tier?.name === 'Gold')?.until).toBe(untilAda);
  });

  it('while overridden, orders earn by the override\'s multiplier, and neither an earn nor the evaluation moves the tier', async () => {
    const shop = await ladderShop(t);
    await member(t, shop, 'cy', 0);
    await member(t, shop, 'dee', 150);
    expect((await override(t, shop, { customerIdentifier: 'cy', tierId: shop.tierIds.Gold, until: inHours(24) })).userErrors).toEqual([]);
    expect((await override(t, shop, { customerIdentifier: 'dee', tierId: null, until: inHours(24) })).userErrors).toEqual([]);

    // $7.00 at Gold's ×2 for cy, with no points of her own; $10.00 at ×1 for dee, Silver by her metric.
    const cy = await putOrder(t, shop, 'O-cy', 'cy', '7.00');
    expect(cy.status).toBe(201);
    expect((await cy.json()).order.pointsEarned).toBe(14);
    const dee = await putOrder(t, shop, 'O-dee', 'dee', '10.00');
    expect((await dee.json()).order.pointsEarned).toBe(10);
    const snapshot = await t.app.database.db.selectFrom('orders').select('earn_snapshot').where('shop_id', '=', shop.shopId).where('order_id', '=', 'O-cy').executeTakeFirstOrThrow();
    expect(snapshot.earn_snapshot).toMatchObject({ multiplierBp: 20_000 });

    // dee earns past Gold's threshold: no upgrade while the override holds.
    expect((await addPoints(t, shop, 'dee', 500)).status).toBe(200);
    expect(await standing(t, shop, 'dee')).toMatchObject({ tier: null, tierProgress: { current: '660' } });
    // An evaluation of every member (a ladder change schedules one) leaves both alone.
    const rename = await t.graphql(shop.apiKey, 'mutation($id: ID!) { tierUpdate(input: { id: $id, name: "Bronze" }) { userErrors { code } } }', { id: shop.tierIds.Silver });
    expect(rename.data.tierUpdate.userErrors).toEqual([]);
    await t.app.scheduler.runDue();
    expect([await tierName(t, shop, 'cy'), await tierName(t, shop, 'dee')]).toEqual(['Gold', null]);
    expect(await moves(t, shop, 'dee')).toEqual([
      [null, 'Silver', 'upgrade'],
      ['Silver', null, 'override'],
    ]);

    // Cleared, dee takes Gold by her 660; cy, with 14, none.
    expect((await clear(t, shop, 'dee')).userErrors).toEqual([]);
    expect((await clear(t, shop, 'cy')).userErrors).toEqual([]);
    expect([await tierName(t, shop, 'cy'), await tierName(t, shop, 'dee')]).toEqual([null, 'Gold']);
    expect((await (await putOrder(t, shop, 'O-dee-2', 'dee', '10.00')).json()).order.pointsEarned).toBe(20);
  });

  it('bad input is a userError, never a 500, and changes nothing', async () => {
    const shop = await ladderShop(t);
    await member(t, shop, 'eve', 120);
    const refused = async (input: Record<string, unknown>, code: string, field?: string[]) => {
      const res = await override(t, shop, input);
      expect(res.tierOverride).toBeNull();
      expect(res.userErrors[0]).toMatchObject({ code, ...(field ? { field } : {}) });
    };
    await refused({ customerIdentifier: 'eve', tierId: shop.tierIds.Gold, until: new Date(Date.now() - 1000).toISOString() }, 'validation_error', ['input', 'until']);
    await refused({ customerIdentifier: 'eve', tierId: 'no-such-tier', until: inHours(1) }, 'tier_not_found', ['input', 'tierId']);
    // No tierId at all: refused, so an omission never takes a customer's tier away.
    await refused({ customerIdentifier: 'eve', until: inHours(1) }, 'validation_error', ['input', 'tierId']);
    await refused({ customerIdentifier: 'nobody', tierId: shop.tierIds.Gold, until: inHours(1) }, 'customer_not_found');
    await refused({ customerIdentifier: 'eve', tierId: shop.tierIds.Gold, until: inHours(1), reason: 'x'.repeat(501) }, 'validation_error', ['input', 'reason']);
    await refused({ customerIdentifier: '', tierId: shop.tierIds.Gold, until: inHours(1) }, 'validation_error', ['input', 'customerIdentifier']);
    expect((await clear(t, shop, 'nobody')).userErrors[0].code).toBe('customer_not_found');
    expect((await clear(t, shop, 'eve')).userErrors[0].code).toBe('tier_override_not_found');

    // A shop without tiers has nothing to override with.
    const plain = await t.shop('No tiers');
    await t.customer(plain.shopId, 'zed');
    const none = await t.graphql(plain.apiKey, OVERRIDE, { input: { customerIdentifier: 'zed', tierId: null, until: inHours(1) } });
    expect(none.data.customerTierOverride.userErrors[0].code).toBe('no_tiers');
    expect((await t.graphql(plain.apiKey, CLEAR, { input: { customerIdentifier: 'zed' } })).data.customerTierOverrideClear.userErrors[0].code).toBe('no_tiers');

    // A date GraphQL cannot read is a request error (not a 500).
    const res = await t.post('/graphql', { query: OVERRIDE, variables: { input: { customerIdentifier: 'eve', tierId: null, until: 'next tuesday' } } }, shop.apiKey);
    expect(res.status).toBeLessThan(500);
    expect((await res.json()).errors[0].message).toMatch(/DateTime/);

    expect(await standing(t, shop, 'eve')).toMatchObject({ tier: { tier: { name: 'Silver' } }, tierOverride: null });
    expect(await moves(t, shop, 'eve')).toEqual([[null, 'Silver', 'upgrade']]);
  });

  it('another shop\'s customer cannot be overridden, nor a customer given another shop\'s tier', async () => {
    const a = await ladderShop(t);
    const b = await ladderShop(t);
    await member(t, a, 'fay', 120);
    await member(t, b, 'gus', 120);
    const gus = await customerId(t, b, 'gus');
    expect((await override(t, a, { customerIdentifier: 'gus', tierId: a.tierIds.Gold, until: inHours(1) })).userErrors[0].code).toBe('customer_not_found');
    expect((await override(t, a, { customerIdentifier: 'gus@example.com', tierId: a.tierIds.Gold, until: inHours(1) })).userErrors[0].code).toBe('customer_not_found');
    expect((await clear(t, a, 'gus')).userErrors[0].code).toBe('customer_not_found');
    expect((await override(t, a, { customerIdentifier: 'fay', tierId: b.tierIds.Gold, until: inHours(1) })).userErrors[0].code).toBe('tier_not_found');
    expect(await standing(t, b, 'gus')).toMatchObject({ tier: { tier: { name: 'Silver' } }, tierOverride: null });
    expect(await standing(t, a, 'fay')).toMatchObject({ tier: { tier: { name: 'Silver' } }, tierOverride: null });
    // Shop A's overrides never show on shop B's customer, even when read by id.
    const held = await t.app.database.db.selectFrom('tier_members').select(['override_until', 'tier_id']).where('customer_id', '=', gus).executeTakeFirstOrThrow();
    expect(held).toEqual({ override_until: null, tier_id: b.tierIds.Silver });
  });
});

describe('the end at `until`', () => {
  const clock = movableClock();
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp({ WORKER: 'off' }, { clock: clock.now });
  });
  afterAll(() => t?.stop());

  it('ends by itself once its until passes, and the metric decides (down or up); its lag shows meanwhile', async () => {
    const shop = await ladderShop(t);
    await member(t, shop, 'hal', 120);
    await member(t, shop, 'ivy', 400);
    const until = new Date(Date.now() + HOUR);
    expect((await override(t, shop, { customerIdentifier: 'hal', tierId: shop.tierIds.Gold, until: until.toISOString() })).userErrors).toEqual([]);
    expect((await override(t, shop, { customerIdentifier: 'ivy', tierId: null, until: until.toISOString() })).userErrors).toEqual([]);

    clock.moveTo(new Date(until.getTime() - 1000));
    await t.app.scheduler.runDue();
    expect([await tierName(t, shop, 'hal'), await tierName(t, shop, 'ivy')]).toEqual(['Gold', null]);
    expect((await t.app.scheduler.lag()).tier_override_end).toBe(0);

    clock.moveTo(new Date(until.getTime() + 5000));
    expect((await t.app.scheduler.lag()).tier_override_end).toBeGreaterThanOrEqual(5);
    await t.app.scheduler.runDue();
    expect((await t.app.scheduler.lag()).tier_override_end).toBe(0);
    expect(await standing(t, shop, 'hal')).toMatchObject({ tier: { tier: { name: 'Silver' }, since: new Date(until.getTime() + 5000).toISOString() }, tierOverride: null });
    expect(await standing(t, shop, 'ivy')).toMatchObject({ tier: { tier: { name: 'Gold' } }, tierOverride: null });
    expect(await moves(t, shop, 'hal')).toEqual([
      [null, 'Silver', 'upgrade'],
      ['Silver', 'Gold', 'override'],
      ['Gold', 'Silver', 'override_ended'],
    ]);
    expect(await moves(t, shop, 'ivy')).toEqual([
      [null, 'Gold', 'upgrade'],
      ['Gold', null, 'override'],
      [null, 'Gold', 'override_ended'],
    ]);
    // Back to the normal rules: an earn upgrades again.
    expect((await addPoints(t, shop, 'hal', 200)).status).toBe(200);
    expect(await tierName(t, shop, 'hal')).toBe('Gold');
    await t.app.scheduler.runDue();
    expect((await moves(t, shop, 'hal')).length).toBe(4);
  });

  it('two schedulers over one database end each override once', async () => {
    const shop = await ladderShop(t);
    const ids = Array.from({ length: 30 }, (_, i) => `twin-${i}`);
    const until = new Date(Date.now() + HOUR);
    for (const id of ids) {
      await member(t, shop, id, 120);
      expect((await override(t, shop, { customerIdentifier: id, tierId: shop.tierIds.Gold, until: until.toISOString() })).userErrors).toEqual([]);
    }
    clock.moveTo(new Date(until.getTime() + 1000));
    // A second scheduler of the end alone, small batches, beside the app's own.
    const other = createScheduler({ db: t.app.database.db, kinds: [tierOverrideEnd], logger: createLogger('silent'), now: () => new Date(clock.now()), batchSize: 7 });
    await Promise.all([t.app.scheduler.runDue(), other.runDue(), t.app.scheduler.runDue(), other.runDue()]);
    for (const id of ids) expect(await moves(t, shop, id)).toEqual([
      [null, 'Silver', 'upgrade'],
      ['Silver', 'Gold', 'override'],
      ['Gold', 'Silver', 'override_ended'],
    ]);
  });
});

/** The tiers/changed events of each customer chain (every previousTier the tier before) up to the tier held. */
async function checkChains(t: TestApp, shop: Shop) {
  const events = await tierEvents(t, shop);
  const members = await t.app.database.db.selectFrom('tier_members').select(['customer_id', 'tier_id']).where('shop_id', '=', shop.shopId).execute();
  const names = new Map(Object.entries(shop.tierIds).map(([name, id]) => [id, name]));
  const held = new Map<string, string | null>();
  for (const e of events) {
    expect(e.previousTier?.name ?? null).toBe(held.get(e.customer) ?? null);
    expect(e.tier?.name ?? null).not.toBe(e.previousTier?.name ?? null);
    held.set(e.customer, e.tier?.name ?? null);
  }
  for (const m of members) expect(held.get(m.customer_id) ?? null).toBe(m.tier_id ? names.get(m.tier_id) : null);
}

describe('racing overrides, clears and earns on one customer', () => {
  it('leave a consistent state: the last committed override holds, or the metric decides; events chain to it', async () => {
    const pg = onPostgres ? await isolatedPostgresUrl() : undefined;
    const a = await startTestApp({ WORKER: 'off', ...(pg ? { DATABASE_URL: pg.url } : {}) });
    // On PostgreSQL a second instance on the same database; PGlite is one process's.
    const b = pg ? await startTestApp({ WORKER: 'off', DATABASE_URL: pg.url }) : a;
    try {
      const shop = await ladderShop(a);
      await member(a, shop, 'race', 50);
      const tierIds = [shop.tierIds.Gold, null, shop.tierIds.Silver];
      const untils = Array.from({ length: 12 }, (_, i) => inHours(1 + i));
      const answers = await Promise.all([
        ...untils.map((until, i) => (i % 2 ? a : b).graphql(shop.apiKey, OVERRIDE, { input: { customerIdentifier: 'race', tierId: tierIds[i % 3], until } })),
        ...Array.from({ length: 6 }, (_, i) => (i % 2 ? b : a).graphql(shop.apiKey, CLEAR, { input: { customerIdentifier: 'race' } })),
        ...Array.from({ length: 20 }, (_, i) => addPoints(i % 2 ? a : b, shop, 'race', 10)),
      ]);
      for (const res of answers.slice(0, 18)) {
        expect(res.errors).toBeUndefined();
        const payload = res.data.customerTierOverride ?? res.data.customerTierOverrideClear;
        expect(payload.userErrors.filter((e: { code: string }) => e.code !== 'tier_override_not_found')).toEqual([]);
      }
      for (const res of answers.slice(18) as Response[]) expect(res.status).toBe(200);

      const state = await standing(a, shop, 'race');
      expect(state).toMatchObject({ points: 250, tierProgress: { current: '250' } });
      if (state.tierOverride) {
        // The override in force is one that was asked for, whole: its until and its tier together.
        const i = untils.indexOf(state.tierOverride.until);
        expect(i).toBeGreaterThanOrEqual(0);
        expect(state.tier?.tier.name ?? null).toBe(i % 3 === 0 ? 'Gold' : i % 3 === 1 ? null : 'Silver');
      } else {
        // Cleared last: the metric's tier, which the adds after the clear only raise.
        expect(state.tier.tier.name).toBe('Silver');
      }
      await checkChains(a, shop);
    } finally {
      if (b !== a) await b.stop();
      await a.stop();
      await pg?.drop();
    }
  }, 60_000);
});

describe.runIf(onPostgres)('on PostgreSQL, two instances', () => {
  it('end each due override once, while earns of the same customers race them', async () => {
    await withTwoInstances(async (a, b, clock) => {
      const shop = await ladderShop(a);
      const ids = Array.from({ length: 60 }, (_, i) => `pair-${i}`);
      const until = new Date(Date.now() + HOUR);
      for (const id of ids) await member(a, shop, id, 120);
      await Promise.all(ids.map(async (id, i) => expect((await override(i % 2 ? a : b, shop, { customerIdentifier: id, tierId: i % 2 ? shop.tierIds.Gold : null, until: until.toISOString() })).userErrors).toEqual([])));
      clock.moveTo(new Date(until.getTime() + 1000));
      // Ten of them earn 200 more meanwhile: Gold by their metric, whether before or after their end.
      await Promise.all([
        a.app.scheduler.runDue(),
        b.app.scheduler.runDue(),
        ...ids.slice(0, 10).map((id, i) => addPoints(i % 2 ? a : b, shop, id, 200)),
        a.app.scheduler.runDue(),
        b.app.scheduler.runDue(),
      ]);
      await a.app.scheduler.runDue();
      for (const [i, id] of ids.entries()) {
        expect(await standing(a, shop, id)).toMatchObject({ tier: { tier: { name: i < 10 ? 'Gold' : 'Silver' } }, tierOverride: null });
        // Ended once: a change of tier each, but for a Gold override whose customer reached Gold by their earn first (no change, no event).
        const ended = (await moves(a, shop, id)).filter(([, , reason]) => reason === 'override_ended');
        if (i >= 10) expect(ended).toEqual([[i % 2 ? 'Gold' : null, 'Silver', 'override_ended']]);
        else expect(ended.length).toBeLessThanOrEqual(1);
      }
      await checkChains(a, shop);
    });
  }, 60_000);
});

describe('after downtime', () => {
  it('a restart while overrides are due ends them at the start, once', async () => {
    // One database for both starts: an embedded one in a folder, or a private PostgreSQL schema.
    const { env, drop } = await cliDatabase('loyalty-overrides-');
    const clock = movableClock();
    try {
      const first = await startTestApp({ ...env, WORKER: 'off' }, { clock: clock.now });
      const shop = await ladderShop(first);
      const until = new Date(Date.now() + HOUR);
      for (const id of ['r-1', 'r-2', 'r-3']) {
        await member(first, shop, id, 120);
        expect((await override(first, shop, { customerIdentifier: id, tierId: shop.tierIds.Gold, until: until.toISOString() })).userErrors).toEqual([]);
      }
      await first.app.scheduler.runDue();
      await first.stop();
      clock.moveTo(new Date(until.getTime() + 2 * HOUR));
      // Started with its worker on: the due ends are its first pass's.
      const second = await startTestApp(env, { clock: clock.now });
      try {
        await eventually(async () => (await tierEvents(second, shop)).filter((e) => e.reason === 'override_ended').length === 3, 10_000, 'the overrides ended');
        await second.app.scheduler.runDue();
        for (const id of ['r-1', 'r-2', 'r-3']) {
          expect(await moves(second, shop, id)).toEqual([
            [null, 'Silver', 'upgrade'],
            ['Silver', 'Gold', 'override'],
            ['Gold', 'Silver', 'override_ended'],
          ]);
          expect(await standing(second, shop, id)).toMatchObject({ tier: { tier: { name: 'Silver' } }, tierOverride: null });
        }
      } finally {
        await second.stop();
      }
    } finally {
      await drop();
    }
  }, 60_000);
});
