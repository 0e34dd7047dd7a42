import { spawn } from 'node:child_process';
import { createHmac } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDatabase } from '../src/db/database.js';
import { migrateToLatest } from '../src/db/migrate.js';
import { shopPeriods } from '../src/domain/kernel/calendar.js';
import { MAX_ATTEMPTS, recordFailure, RETRY_DELAYS_MS } from '../src/domain/kernel/scheduling.js';
import { createShop } from '../src/domain/shops/shops.js';
import { isolatedPostgresUrl, movableClock, onPostgres, startTestApp, type TestApp } from './helpers.js';
import { until } from './live-helpers.js';

/**
 * DESIGN.md "Scheduled and background work: every row fails alone": an item of due work that
 * fails is tried again with backoff and set aside after its last try, visible to the shop and in
 * /metrics, while every other item, shop and kind goes on. The poisons are real ones: a time zone
 * PostgreSQL does not know, stored before shopSettingsUpdate refused it (every ledger write of
 * that shop fails in the ledger's triggers), and a webhook body jsonb refuses, stored before the
 * door refused it.
 */

const DB_NAME = onPostgres ? 'PostgreSQL' : 'PGlite';
const DAY = 86_400_000;
const HOUR = 3_600_000;
/** A zone Intl knows and PostgreSQL does not (issue 31). */
const DEAD_ZONE = 'US/Pacific-New';

const SETTINGS = 'mutation($input: ShopSettingsInput!) { shopSettingsUpdate(input: $input) { settings { timezone } userErrors { code field message } } }';

let t: TestApp;
const clock = movableClock();
const db = () => t.app.database.db;

beforeAll(async () => {
  clock.moveTo(new Date());
  t = await startTestApp({ WORKER: 'off' }, { clock: clock.now });
});
afterAll(() => t?.stop());

const later = (ms: number) => clock.moveTo(new Date(clock.now() + ms));

/** As a shop saved before the zone was checked against PostgreSQL: written directly. */
const storeDeadZone = (shopId: string) => db().updateTable('shops').set({ timezone: DEAD_ZONE }).where('id', '=', shopId).execute();

function failures(kind: string) {
  return db().selectFrom('due_work_failures').selectAll().where('kind', '=', kind).orderBy('item').execute();
}

/** Runs the due work at each retry time in turn: the failing items use up their tries. */
async function retryUntilSetAside() {
  for (const delay of RETRY_DELAYS_MS) {
    later(delay);
    await t.app.scheduler.runDue();
  }
}

async function metric(name: string, kind: string): Promise<number | undefined> {
  const text = await (await fetch(`${t.url}/metrics`)).text();
  const match = new RegExp(`^${name}\\{kind="${kind}"\\} (\\S+)$`, 'm').exec(text);
  return match ? Number(match[1]) : undefined;
}

async function balances(shopId: string) {
  const rows = await db().selectFrom('customers').select(['shopify_customer_id', 'points', 'pending_points']).where('shop_id', '=', shopId).orderBy('shopify_customer_id').execute();
  return Object.fromEntries(rows.map((r) => [r.shopify_customer_id, { points: r.points, pending: r.pending_points }]));
}

async function pendingShop(name: string) {
  const shop = await t.shop(name);
  expect((await t.graphql(shop.apiKey, SETTINGS, { input: { pendingDays: 1 } })).data.shopSettingsUpdate.userErrors).toEqual([]);
  await t.graphql(shop.apiKey, 'mutation { earningRuleCreate(input: { type: place_order, name: "1 pt per $1", earnPoint: 1, spent: "1.00" }) { userErrors { message } } }');
  return shop;
}

function putOrder(apiKey: string, orderId: string, customerIdentifier: string, total: string) {
  return fetch(`${t.url}/rest-api/v1/orders/${orderId}`, {
    method: 'PUT',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${apiKey}` },
    body: JSON.stringify({ customerIdentifier, currency: 'USD', subtotal: total, total, status: 'paid', lineItems: [{ productId: 'p', quantity: 1, price: total }] }),
  });
}

describe(`every item of due work fails alone (${DB_NAME})`, () => {
  it('pending points: a poisoned shop\'s rows in the middle of a batch of three shops fail alone, are retried with backoff, then set aside; the others are released in the same pass', async () => {
    clock.moveTo(new Date());
    const shops = [await pendingShop('Pending A'), await pendingShop('Pending B'), await pendingShop('Pending C')];
    const [poisoned, b, c] = shops as [(typeof shops)[0], (typeof shops)[0], (typeof shops)[0]];
    // Interleaved: the poisoned shop's rows fall between the others' in the one batch a pass claims.
    for (let i = 0; i < 3; i++) {
      for (const [k, shop] of shops.entries()) {
        await t.customer(shop.shopId, `p${k}-${i}`);
        expect((await putOrder(shop.apiKey, `o${k}-${i}`, `p${k}-${i}`, '10.00')).status).toBe(201);
      }
    }
    await storeDeadZone(poisoned.shopId);
    later(DAY + 60_000);
    await t.app.scheduler.runDue();

    for (const [k, shop] of [b, c].map((s, i) => [i + 1, s] as const)) {
      expect(await balances(shop.shopId)).toEqual(Object.fromEntries([0, 1, 2].map((i) => [`p${k}-${i}`, { points: 10, pending: 0 }])));
    }
    expect(await balances(poisoned.shopId)).toEqual(Object.fromEntries([0, 1, 2].map((i) => [`p0-${i}`, { points: 0, pending: 10 }])));
    const first = await failures('pending_points');
    expect(first).toHaveLength(3);
    for (const f of first) expect(f).toMatchObject({ shop_id: poisoned.shopId, attempts: 1, set_aside_at: null, reason: expect.stringContaining('time zone') });
    // Waiting for their next try, they are not claimed again, and not counted as late.
    await t.app.scheduler.runDue();
    expect((await failures('pending_points')).map((f) => f.attempts)).toEqual([1, 1, 1]);
    expect((await t.app.scheduler.lag()).pending_points).toBe(0);
    expect(await metric('loyalty_due_work_retrying_items', 'pending_points')).toBe(3);

    await retryUntilSetAside();
    const last = await failures('pending_points');
    expect(last.map((f) => [f.attempts, f.set_aside_at !== null])).toEqual(last.map(() => [MAX_ATTEMPTS, true]));
    later(30 * DAY);
    await t.app.scheduler.runDue();
    expect((await failures('pending_points')).map((f) => f.attempts)).toEqual([MAX_ATTEMPTS, MAX_ATTEMPTS, MAX_ATTEMPTS]);
    expect(await metric('loyalty_due_work_failed_items', 'pending_points')).toBe(3);
    expect(await metric('loyalty_due_work_retrying_items', 'pending_points')).toBe(0);
    expect(await metric('loyalty_due_work_lag_seconds', 'pending_points')).toBe(0);

    // The shop fixes its zone: what was set aside is tried again, and goes through.
    expect((await t.graphql(poisoned.apiKey, SETTINGS, { input: { timezone: 'America/Los_Angeles' } })).data.shopSettingsUpdate.userErrors).toEqual([]);
    await t.app.scheduler.runDue();
    expect(await balances(poisoned.shopId)).toEqual(Object.fromEntries([0, 1, 2].map((i) => [`p0-${i}`, { points: 10, pending: 0 }])));
    expect(await failures('pending_points')).toEqual([]);
  });

  it('point expiry: a poisoned shop\'s customers in the middle of a batch fail alone; the other shops\' points expire in the same pass', async () => {
    clock.moveTo(new Date());
    const shops = [];
    for (const name of ['Expiry X', 'Expiry Y', 'Expiry Z']) {
      const shop = await t.shop(name);
      expect((await t.graphql(shop.apiKey, SETTINGS, { input: { expiry: { mode: 'per_earn', days: 1 } } })).data.shopSettingsUpdate.userErrors).toEqual([]);
      shops.push(shop);
    }
    // Customers are claimed in id order, and ids follow creation: interleaved shops, one batch.
    for (let i = 0; i < 3; i++) for (const [k, shop] of shops.entries()) await t.customer(shop.shopId, `e${k}-${i}`, 20);
    const [poisoned, ...others] = shops as [(typeof shops)[0], ...typeof shops];
    // A fault of the first shop's alone, in the database (a time zone PostgreSQL does not know does
    // not stop an expiry: its entry is a debit, which no trigger dates).
    await sql.raw(`create function refuse_shop() returns trigger language plpgsql as $$ begin if new.shop_id = '${poisoned.shopId}' then raise exception 'shop refused'; end if; return new; end $$`).execute(db());
    await sql`create trigger refuse_shop before insert on activities for each row execute function refuse_shop()`.execute(db());
    later(3 * DAY);
    try {
      await t.app.scheduler.runDue();
    } finally {
      await sql`drop trigger refuse_shop on activities`.execute(db());
      await sql`drop function refuse_shop()`.execute(db());
    }
    for (const [k, shop] of others.entries()) {
      expect(await balances(shop.shopId)).toEqual(Object.fromEntries([0, 1, 2].map((i) => [`e${k + 1}-${i}`, { points: 0, pending: 0 }])));
    }
    expect(Object.values(await balances(poisoned.shopId)).map((b) => b.points)).toEqual([20, 20, 20]);
    const failed = await failures('point_expiry');
    expect(failed.map((f) => [f.shop_id, f.attempts, f.reason])).toEqual(failed.map(() => [poisoned.shopId, 1, 'shop refused']));
    expect(failed).toHaveLength(3);
    expect((await t.app.scheduler.lag()).point_expiry).toBe(0);
    expect(await metric('loyalty_due_work_retrying_items', 'point_expiry')).toBe(3);
    // The fault gone, the next try expires them.
    later(RETRY_DELAYS_MS[0]);
    await t.app.scheduler.runDue();
    expect(Object.values(await balances(poisoned.shopId)).map((b) => b.points)).toEqual([0, 0, 0]);
    expect(await failures('point_expiry')).toEqual([]);
  });

  it('expiry warnings: a warning that fails (a trigger refusing it) fails alone; the others go out', async () => {
    clock.moveTo(new Date());
    const shop = await t.shop('Warning shop');
    expect((await t.graphql(shop.apiKey, SETTINGS, { input: { expiry: { mode: 'per_earn', days: 10, warningDays: 3 } } })).data.shopSettingsUpdate.userErrors).toEqual([]);
    for (const id of ['w1', 'w2', 'w3']) await t.customer(shop.shopId, id, 5);
    const w2 = await db().selectFrom('customers').select('id').where('shop_id', '=', shop.shopId).where('shopify_customer_id', '=', 'w2').executeTakeFirstOrThrow();
    // A fault of w2's alone, in the database: whatever refuses one row of a batch.
    await sql.raw(`create function refuse_w2() returns trigger language plpgsql as $$ begin if new.customer_id = '${w2.id}' then raise exception 'w2 refused'; end if; return new; end $$`).execute(db());
    await sql`create trigger refuse_w2 before insert on expiry_warnings for each row execute function refuse_w2()`.execute(db());
    try {
      later(9 * DAY);
      await t.app.scheduler.runDue();
      const warned = await db().selectFrom('outbox_events').select(sql<string>`data->>'customer'`.as('customer')).where('shop_id', '=', shop.shopId).where('type', '=', 'points/expiring').execute();
      const ids = await db().selectFrom('customers').select(['id', 'shopify_customer_id']).where('shop_id', '=', shop.shopId).execute();
      const name = new Map(ids.map((c) => [c.id, c.shopify_customer_id]));
      expect(warned.map((w) => name.get(w.customer)).sort()).toEqual(['w1', 'w3']);
      expect(await failures('expiry_warnings')).toEqual([expect.objectContaining({ item: w2.id, shop_id: shop.shopId, attempts: 1, reason: expect.stringContaining('w2 refused') })]);
    } finally {
      await sql`drop trigger refuse_w2 on expiry_warnings`.execute(db());
      await sql`drop function refuse_w2()`.execute(db());
    }
    // The fault gone, its next try sends it.
    later(RETRY_DELAYS_MS[0]);
    await t.app.scheduler.runDue();
    expect(await failures('expiry_warnings')).toEqual([]);
    const events = await db().selectFrom('outbox_events').select('id').where('shop_id', '=', shop.shopId).where('type', '=', 'points/expiring').execute();
    expect(events).toHaveLength(3);
  });

  it('day runs: a shop whose birthdays and tier evaluation fail is set aside alone; another shop\'s run that day, and its lag is 0', async () => {
    const today = shopPeriods(new Date(), 'UTC').day;
    const dayShop = async (name: string) => {
      const shop = await t.shop(name);
      await t.graphql(shop.apiKey, 'mutation($input: CustomerInput!) { customerUpsert(input: $input) { created } }', { input: { shopifyCustomerId: 'bday', email: 'bday@example.com', birthday: `1990${today.slice(4)}` } });
      await t.customer(shop.shopId, 'member');
      // A rolling window: the evaluation counts the shop's days in SQL, in its zone.
      expect((await t.graphql(shop.apiKey, SETTINGS, { input: { tiers: { window: 'rolling_days', days: 30 } } })).data.shopSettingsUpdate.userErrors).toEqual([]);
      expect((await t.graphql(shop.apiKey, 'mutation { earningRuleCreate(input: { type: birthday, name: "Birthday", earnPoint: 30 }) { userErrors { message } } }')).data.earningRuleCreate.userErrors).toEqual([]);
      expect((await t.graphql(shop.apiKey, 'mutation { tierCreate(input: { name: "Silver", threshold: "10" }) { userErrors { message } } }')).data.tierCreate.userErrors).toEqual([]);
      expect((await t.post('/rest-api/v1/points/add', { customerIdentifier: 'member', amount: 50 }, shop.apiKey)).status).toBe(200);
      return shop;
    };
    const poisoned = await dayShop('Day runs poisoned');
    const healthy = await dayShop('Day runs healthy');
    await storeDeadZone(poisoned.shopId);
    // The real clock: the runs are due since today's (UTC) midnight.
    clock.moveTo(new Date());
    await t.app.scheduler.runDue();
    expect((await balances(healthy.shopId)).bday?.points).toBe(30);
    const healthyRuns = await db().selectFrom('shop_day_runs').select(['kind', 'day']).where('shop_id', '=', healthy.shopId).orderBy('kind').execute();
    expect(healthyRuns.map((r) => r.day > today)).toEqual([true, true]);
    expect((await balances(poisoned.shopId)).bday?.points).toBe(0);
    for (const kind of ['birthdays', 'tier_evaluation']) {
      expect(await failures(kind)).toEqual([expect.objectContaining({ item: poisoned.shopId, shop_id: poisoned.shopId, attempts: 1, reason: expect.stringContaining('time zone') })]);
    }
    const lag = await t.app.scheduler.lag();
    expect([lag.birthdays, lag.tier_evaluation]).toEqual([0, 0]);
    await retryUntilSetAside();
    for (const kind of ['birthdays', 'tier_evaluation']) expect((await failures(kind))[0]).toMatchObject({ attempts: MAX_ATTEMPTS, set_aside_at: expect.any(Date) });
  });

  it('a failure whose next try no worker made for a day is forgotten: its item, if still due, starts its tries afresh', async () => {
    clock.moveTo(new Date());
    const shop = await t.shop('Stale failure');
    await recordFailure(db(), 'pending_points', { item: 'pending_gone', shopId: shop.shopId }, new Error('its transaction died'), new Date(clock.now() - 2 * DAY));
    await recordFailure(db(), 'pending_points', { item: 'pending_recent', shopId: shop.shopId }, new Error('just now'), new Date(clock.now()));
    await t.app.scheduler.runDue();
    expect((await failures('pending_points')).filter((f) => f.shop_id === shop.shopId).map((f) => f.item)).toEqual(['pending_recent']);
  });

  it('a kind that throws as a whole (its table gone) is logged and counted; the kinds after it run in that same pass', async () => {
    clock.moveTo(new Date());
    const shop = await t.shop('Kind failure');
    await t.customer(shop.shopId, '5501');
    await db().insertInto('shopify_inbox').values({ id: 'inbox_kind_failure', shop_id: shop.shopId, webhook_id: 'kf-1', topic: 'customers/update', body: JSON.stringify({ id: 5501, email: 'k1-new@example.com' }), next_attempt_at: new Date(clock.now()) }).execute();
    const before = (await metric('loyalty_due_work_kind_failures_total', 'pending_points')) ?? 0;
    // pending_points is the first kind of a pass: its failure once ended the pass for every kind.
    await sql`alter table pending_points rename to pending_points_away`.execute(db());
    try {
      await t.app.scheduler.runDue();
    } finally {
      await sql`alter table pending_points_away rename to pending_points`.execute(db());
    }
    expect(await metric('loyalty_due_work_kind_failures_total', 'pending_points')).toBe(before + 1);
    const applied = await db().selectFrom('shopify_inbox').select(['processed_at', 'error']).where('id', '=', 'inbox_kind_failure').executeTakeFirstOrThrow();
    expect(applied).toEqual({ processed_at: expect.any(Date), error: null });
    expect((await db().selectFrom('customers').select('email').where('shop_id', '=', shop.shopId).executeTakeFirstOrThrow()).email).toBe('k1-new@example.com');
  });
});

describe(`the Shopify inbox (${DB_NAME})`, () => {
  const WEBHOOKS = '{ shop { shopifyWebhooks(first: 20) { edges { node { id webhookId status attempts error } } } } }';
  const RETRY = 'mutation($input: ShopifyWebhookRetryInput!) { shopifyWebhookRetry(input: $input) { shopifyWebhook { webhookId status } userErrors { code field } } }';

  it('a body jsonb refuses, stored before the door refused it, fails alone: listed as waiting, then failed with its reason; shopifyWebhookRetry tries it again', async () => {
    clock.moveTo(new Date());
    const shop = await t.shop('Inbox shop');
    await t.customer(shop.shopId, '5502');
    const now = new Date(clock.now());
    const order = { id: 770001, updated_at: '2026-11-20T10:00:00Z', financial_status: 'paid', currency: 'USD', total_price: '0.00', note: 'gift \u0000 wrap', customer: { id: 1, email: 'x@example.com' }, line_items: [] };
    await db()
      .insertInto('shopify_inbox')
      .values([
        { id: 'inbox_poisoned', shop_id: shop.shopId, webhook_id: 'poisoned', topic: 'orders/paid', body: JSON.stringify(order), received_at: now, next_attempt_at: now },
        { id: 'inbox_fine', shop_id: shop.shopId, webhook_id: 'fine', topic: 'customers/update', body: JSON.stringify({ id: 5502, email: 'ok-1-new@example.com' }), received_at: new Date(now.getTime() + 1), next_attempt_at: now },
      ])
      .execute();
    await t.app.scheduler.runDue();
    const list = async () => (await t.graphql(shop.apiKey, WEBHOOKS)).data.shop.shopifyWebhooks.edges.map((e: any) => e.node) as Array<{ id: string; webhookId: string; status: string; attempts: number; error: string | null }>;
    expect(await list()).toEqual([
      { id: 'inbox_fine', webhookId: 'fine', status: 'applied', attempts: 1, error: null },
      { id: 'inbox_poisoned', webhookId: 'poisoned', status: 'waiting', attempts: 1, error: expect.stringMatching(/Unicode|\\u0000/) },
    ]);
    expect((await t.app.scheduler.lag()).shopify_inbox).toBe(0);
    await retryUntilSetAside();
    expect((await list())[1]).toMatchObject({ status: 'failed', attempts: MAX_ATTEMPTS, error: expect.stringMatching(/Unicode|\\u0000/) });
    expect(await metric('loyalty_due_work_failed_items', 'shopify_inbox')).toBe(1);

    // Tried again on request: waiting, then its tries again (this body never goes through).
    const retried = await t.graphql(shop.apiKey, RETRY, { input: { id: 'inbox_poisoned' } });
    expect(retried.data.shopifyWebhookRetry).toEqual({ shopifyWebhook: { webhookId: 'poisoned', status: 'waiting' }, userErrors: [] });
    await t.app.scheduler.runDue();
    expect((await list())[1]).toMatchObject({ status: 'waiting', attempts: MAX_ATTEMPTS + 1 });
    // Only a failed webhook, and only the shop's own.
    expect((await t.graphql(shop.apiKey, RETRY, { input: { id: 'inbox_fine' } })).data.shopifyWebhookRetry.userErrors).toEqual([{ code: 'shopify_webhook_not_failed', field: ['input', 'id'] }]);
    const other = await t.shop('Other inbox shop');
    expect((await t.graphql(other.apiKey, RETRY, { input: { id: 'inbox_poisoned' } })).data.shopifyWebhookRetry.userErrors).toEqual([{ code: 'shopify_webhook_not_found', field: ['input', 'id'] }]);
  });
});

describe(`a claiming transaction that dies (${DB_NAME})`, () => {
  it('records its webhook\'s failure in a fresh transaction: a commit refused by a deferred constraint', async () => {
    clock.moveTo(new Date());
    const shop = await t.shop('Dying commit');
    const now = new Date(clock.now());
    const order = { id: 990077, updated_at: '2026-11-20T10:00:00Z', financial_status: 'paid', currency: 'USD', total_price: '0.00', customer: { id: 4401, email: 'd@example.com' }, line_items: [] };
    await db().insertInto('shopify_inbox').values({ id: 'inbox_dying', shop_id: shop.shopId, webhook_id: 'dying', topic: 'orders/paid', body: JSON.stringify(order), received_at: now, next_attempt_at: now }).execute();
    // Checked at commit, after every statement of the apply went through.
    await sql`create function refuse_at_commit() returns trigger language plpgsql as $$ begin if new.shopify_order_id = '990077' then raise exception 'refused at commit'; end if; return null; end $$`.execute(db());
    await sql`create constraint trigger refuse_at_commit after insert on shopify_orders deferrable initially deferred for each row execute function refuse_at_commit()`.execute(db());
    try {
      await t.app.scheduler.runDue();
    } finally {
      await sql`drop trigger refuse_at_commit on shopify_orders`.execute(db());
      await sql`drop function refuse_at_commit()`.execute(db());
    }
    expect(await failures('shopify_inbox')).toContainEqual(expect.objectContaining({ item: 'inbox_dying', attempts: 1, reason: 'refused at commit' }));
    expect(await db().selectFrom('shopify_inbox').select(['processed_at', 'attempts', 'error']).where('id', '=', 'inbox_dying').executeTakeFirstOrThrow()).toEqual({ processed_at: null, attempts: 1, error: 'refused at commit' });
    // Its next try goes through.
    later(RETRY_DELAYS_MS[0]);
    await t.app.scheduler.runDue();
    expect(await db().selectFrom('shopify_inbox').select(['processed_at', 'attempts', 'error']).where('id', '=', 'inbox_dying').executeTakeFirstOrThrow()).toEqual({ processed_at: expect.any(Date), attempts: 2, error: null });
    expect((await failures('shopify_inbox')).map((f) => f.item)).not.toContain('inbox_dying');
  });
});

describe(`due-work failed and due-work retry (the CLI, ${DB_NAME})`, () => {
  it('lists what was set aside and gives it its tries again', async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'loyalty-due-work-'));
    const pg = onPostgres ? await isolatedPostgresUrl() : undefined;
    const env: Record<string, string> = pg ? { DATABASE_URL: pg.url } : { DATABASE_URL: '', DATA_DIR: dir };
    try {
      const database = await openDatabase(pg ? { url: pg.url } : { dataDir: dir });
      let shopId: string;
      try {
        await migrateToLatest(database.db);
        shopId = (await createShop(database.db, 'CLI shop')).shop.id;
        const now = new Date();
        for (let i = 0; i < MAX_ATTEMPTS; i++) await recordFailure(database.db, 'shopify_inbox', { item: 'inbox_a', shopId }, new Error('refused'), now);
        await recordFailure(database.db, 'pending_points', { item: 'pending_b', shopId }, new Error('once'), now);
      } finally {
        await database.close();
      }
      const cli = (args: string[]) =>
        new Promise<{ code: number | null; stdout: string }>((resolve, reject) => {
          const child = spawn(path.resolve('node_modules/.bin/tsx'), ['src/cli/main.ts', ...args], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'inherit'] });
          let stdout = '';
          child.stdout.on('data', (d) => (stdout += d));
          child.on('error', reject);
          child.on('close', (code) => resolve({ code, stdout }));
        });
      const failed = await cli(['due-work', 'failed', '--all', '--json']);
      expect(failed.code).toBe(0);
      expect(JSON.parse(failed.stdout).failures).toEqual([
        expect.objectContaining({ kind: 'pending_points', item: 'pending_b', shopId, attempts: 1, reason: 'once', setAsideAt: null }),
        expect.objectContaining({ kind: 'shopify_inbox', item: 'inbox_a', shopId, attempts: MAX_ATTEMPTS, reason: 'refused', setAsideAt: expect.any(String) }),
      ]);
      // Only what was set aside is retried; the other waits for its next try.
      expect(JSON.parse((await cli(['due-work', 'retry', '--shop', 'CLI shop', '--json'])).stdout)).toEqual({ retried: 1 });
      expect(JSON.parse((await cli(['due-work', 'failed', '--all', '--json'])).stdout).failures).toEqual([expect.objectContaining({ item: 'pending_b' })]);
    } finally {
      await pg?.drop();
      await rm(dir, { recursive: true, force: true });
    }
  }, 60_000);
});

describe.runIf(onPostgres)('one shop\'s poison on PostgreSQL, the worker\'s own loop running', () => {
  it('the other shop\'s webhooks, expiry, tiers and birthdays all run within their usual lag', async () => {
    // Time runs (webhooks are stamped by the real clock), moved on by hand.
    let offset = 0;
    const loopClock = { now: () => Date.now() + offset };
    const app = await startTestApp({}, { clock: loopClock.now });
    const adb = app.app.database.db;
    /** How long `check` took to hold, polled: the loop passes every second. */
    const within = async (what: string, check: () => Promise<boolean>) => {
      const started = Date.now();
      await until(check, 10_000, what);
      return Date.now() - started;
    };
    try {
      const inThreeDays = shopPeriods(new Date(loopClock.now() + 3 * DAY), 'UTC').day;
      const setUp = async (name: string) => {
        const s = await app.shop(name);
        const domain = `${name.toLowerCase()}-${Math.random().toString(36).slice(2, 8)}.myshopify.com`;
        const settings = await app.graphql(s.apiKey, SETTINGS, { input: { expiry: { mode: 'per_earn', days: 1 }, tiers: { window: 'rolling_days', days: 30 } } });
        expect(settings.data.shopSettingsUpdate.userErrors).toEqual([]);
        const connected = await app.graphql(s.apiKey, 'mutation($i: ShopifySettingsInput!) { shopifySettingsUpdate(input: $i) { userErrors { code } } }', { i: { shopDomain: domain, webhookSecret: 'shpss_loop_secret_0123' } });
        expect(connected.data.shopifySettingsUpdate.userErrors).toEqual([]);
        await app.graphql(s.apiKey, 'mutation($input: CustomerInput!) { customerUpsert(input: $input) { created } }', { input: { shopifyCustomerId: 'bday', email: 'bday@example.com', birthday: `1990${inThreeDays.slice(4)}` } });
        expect((await app.graphql(s.apiKey, 'mutation { earningRuleCreate(input: { type: birthday, name: "Birthday", earnPoint: 30 }) { userErrors { message } } }')).data.earningRuleCreate.userErrors).toEqual([]);
        expect((await app.graphql(s.apiKey, 'mutation { tierCreate(input: { name: "Silver", threshold: "10" }) { userErrors { message } } }')).data.tierCreate.userErrors).toEqual([]);
        // Points that expire in a day, and make a Silver member whose points leave the window in 30.
        expect((await app.post('/rest-api/v1/points/add', { customerIdentifier: 'bday', amount: 40 }, s.apiKey)).status).toBe(200);
        return { ...s, domain };
      };
      const healthy = await setUp('Healthy');
      const poisoned = await setUp('Poisoned');
      // The poisoned shop: a webhook whose body jsonb refuses and a zone PostgreSQL does not know,
      // both stored before they were refused at the door.
      const order = { id: 880001, updated_at: '2026-11-20T10:00:00Z', financial_status: 'paid', currency: 'USD', total_price: '0.00', note: '\u0000', customer: { id: 1 }, line_items: [] };
      await adb.insertInto('shopify_inbox').values({ id: 'loop_poisoned', shop_id: poisoned.shopId, webhook_id: 'loop-poisoned', topic: 'orders/paid', body: JSON.stringify(order), next_attempt_at: new Date(loopClock.now()) }).execute();
      await adb.updateTable('shops').set({ timezone: DEAD_ZONE }).where('id', '=', poisoned.shopId).execute();
      await within('the poisoned webhook\'s first try', async () => (await adb.selectFrom('due_work_failures').select('attempts').where('item', '=', 'loop_poisoned').executeTakeFirst()) !== undefined);

      // A webhook of the healthy shop, applied within the loop's second.
      const body = JSON.stringify({ id: 990001, email: 'loop@example.com' });
      const res = await fetch(`${app.url}/integrations/shopify/webhooks`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-shopify-topic': 'customers/create', 'x-shopify-hmac-sha256': createHmac('sha256', 'shpss_loop_secret_0123').update(body).digest('base64'), 'x-shopify-shop-domain': healthy.domain, 'x-shopify-webhook-id': 'loop-healthy' },
        body,
      });
      expect(res.status).toBe(200);
      const webhookMs = await within('the healthy webhook applied', async () => (await adb.selectFrom('customers').select('id').where('shop_id', '=', healthy.shopId).where('shopify_customer_id', '=', '990001').executeTakeFirst()) !== undefined);

      // Three days on: the healthy shop's points expire, its birthday is awarded, its tiers are
      // evaluated for the new day; the poisoned shop's day runs and webhook keep failing. Nine hours
      // more, so that the birthday has begun in the poisoned shop's zone too (8 h behind UTC)
      // whatever the hour the test runs at; before 08:00 UTC it had not, and its run never failed.
      offset += 3 * DAY + 9 * HOUR;
      const entries = async (shopId: string, type: 'expire_points' | 'earn_points') => (await adb.selectFrom('activities').select('type').where('shop_id', '=', shopId).where('type', '=', type).execute()).length;
      const runDay = async (shopId: string, kind: 'birthdays' | 'tiers') => (await adb.selectFrom('shop_day_runs').select('day').where('shop_id', '=', shopId).where('kind', '=', kind).executeTakeFirstOrThrow()).day;
      const birthdays = async (shopId: string) => (await adb.selectFrom('rule_awards').select('id').where('shop_id', '=', shopId).where('period', '=', inThreeDays.slice(0, 4)).execute()).length;
      const dueWorkMs = await within(
        'the healthy shop\'s expiry, birthday and tier evaluation',
        async () => (await entries(healthy.shopId, 'expire_points')) > 0 && (await birthdays(healthy.shopId)) === 1 && (await runDay(healthy.shopId, 'birthdays')) > inThreeDays && (await runDay(healthy.shopId, 'tiers')) > inThreeDays,
      );
      for (const ms of [webhookMs, dueWorkMs]) expect(ms).toBeLessThan(5_000);
      expect([await entries(poisoned.shopId, 'expire_points'), await birthdays(poisoned.shopId), await runDay(poisoned.shopId, 'birthdays') <= inThreeDays]).toEqual([1, 0, true]);

      // The poisoned shop's items are failing, each alone, and not counted as late.
      // Its birthday run fails only on the birthday itself (the credit needs the zone), which it may
      // reach a pass after the healthy shop is done: wait for it rather than race it.
      const failedKinds = async () => (await adb.selectFrom('due_work_failures').select('kind').where('shop_id', '=', poisoned.shopId).execute()).map((f) => f.kind);
      await within('the poisoned shop\'s birthday run failing alone', async () => (await failedKinds()).includes('birthdays'));
      expect(await failedKinds()).toEqual(expect.arrayContaining(['birthdays', 'shopify_inbox']));
      expect(await adb.selectFrom('shopify_inbox').select('processed_at').where('id', '=', 'loop_poisoned').executeTakeFirstOrThrow()).toEqual({ processed_at: null });
      // Every kind's lag back under 5 s within the loop's usual time: an item the jump made due is
      // late by days until its pass takes it (the poisoned shop's failing items do not count).
      const lags = async () => [...(await (await fetch(`${app.url}/metrics`)).text()).matchAll(/^loyalty_due_work_lag_seconds\{kind="(\w+)"\} (\S+)$/gm)].map(([, kind, value]) => [kind, Number(value)] as const);
      const lagMs = await within('every kind\'s lag under 5 s', async () => (await lags()).every(([, value]) => value < 5));
      expect(lagMs).toBeLessThan(5_000);
      expect((await lags()).length).toBeGreaterThan(0);
    } finally {
      await app.stop();
    }
  }, 60_000);
});
