import { setImmediate } from 'node:timers/promises';
import { Kysely, type KyselyPlugin, PostgresDialect, sql } from 'kysely';
import pg from 'pg';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { buildApp } from '../src/app.js';
import { loadConfig } from '../src/config.js';
import type { DatabaseHandle, DB } from '../src/db/database.js';
import { vacuumPurged } from '../src/db/purge.js';
import type { Database, WebhookDeliveryStatus } from '../src/db/schema.js';
import { inTransaction } from '../src/db/transaction.js';
import { purgeExpiredCustomerAccessTokens } from '../src/domain/customers/customer-access-tokens.js';
import { purgeRelayedOutboxEvents, recordEvent } from '../src/domain/kernel/events.js';
import { newId } from '../src/domain/kernel/ids.js';
import { claimIdempotencyKey, IDEMPOTENCY_TTL_MS, purgeExpiredIdempotencyKeys } from '../src/domain/ledger/idempotency.js';
import { changePoints } from '../src/domain/ledger/points.js';
import { upsertCustomer } from '../src/domain/program/sign-up.js';
import { purgeProcessedShopifyWebhooks } from '../src/domain/shopify/shopify-connector.js';
import { createShop } from '../src/domain/shops/shops.js';
import { createLogger } from '../src/logger.js';
import { purgeDeliveries } from '../src/webhooks/delivery-queue.js';
import { isolatedPostgresUrl, onPostgres, openTestDatabase } from './helpers.js';
import { until } from './live-helpers.js';

const HOUR = 60 * 60 * 1000;
const DAY = 24 * HOUR;
const now = Date.now();
const ago = (ms: number) => new Date(now - ms);

let handle: DatabaseHandle & { url?: string };
let db: DB;
beforeAll(async () => {
  handle = await openTestDatabase();
  db = handle.db;
});
afterAll(() => handle.close());
beforeEach(async () => {
  for (const table of ['webhook_delivery_attempts', 'webhook_deliveries', 'idempotency_keys', 'outbox_events']) {
    await sql`delete from ${sql.table(table)}`.execute(db);
  }
  await db.updateTable('shops').set({ webhook_retention_days: null }).execute();
});

async function shop(name: string, webhookRetentionDays: number | null = null): Promise<string> {
  const { shop } = await createShop(db, name);
  await db.updateTable('shops').set({ webhook_retention_days: webhookRetentionDays }).where('id', '=', shop.id).execute();
  return shop.id;
}

/** A delivery created `age` ago with one attempt; finished unless `due` (then it has work left). */
async function delivery(shopId: string, age: number, state: { status?: WebhookDeliveryStatus; due?: boolean } = {}): Promise<string> {
  const id = newId();
  const status = state.status ?? 'succeeded';
  await db
    .insertInto('webhook_deliveries')
    .values({
      id,
      shop_id: shopId,
      subscription_id: 'sub_1',
      event_id: `evt_${id}`,
      topic: 'points/added',
      status,
      payload: '{}',
      created_at: ago(age),
      due_at: state.due || status === 'sending' ? ago(age - HOUR) : null,
      lease_token: status === 'sending' ? 'lease' : null,
    })
    .execute();
  await db
    .insertInto('webhook_delivery_attempts')
    .values({ id: newId(), delivery_id: id, attempted_at: ago(age), trigger: 'scheduled', url: 'https://example.com/hook', duration_ms: 5 })
    .execute();
  return id;
}

async function idempotencyKey(shopId: string, key: string, age: number): Promise<void> {
  await db
    .insertInto('idempotency_keys')
    .values({ shop_id: shopId, key, request_hash: 'h', response_status: 200, response_body: '{}', created_at: ago(age), completed_at: ago(age) })
    .execute();
}

async function outboxEvent(shopId: string, age: number, relayed: boolean): Promise<string> {
  const id = `evt_${newId()}`;
  await db
    .insertInto('outbox_events')
    .values({ id, shop_id: shopId, type: 'points/added', data: '{}', created_at: ago(age), relayed_at: relayed ? ago(age - 1000) : null })
    .execute();
  return id;
}

const ids = async (table: 'webhook_deliveries' | 'outbox_events') => (await db.selectFrom(table).select('id').execute()).map((r) => r.id).sort();

/** Records the summary row every purge batch returns ({ read, deleted, … }), in order. */
function batchesOf(target: DB): { db: DB; batches: Array<{ read: number; deleted: number }> } {
  const batches: Array<{ read: number; deleted: number }> = [];
  const plugin: KyselyPlugin = {
    transformQuery: (args) => args.node,
    transformResult: async ({ result }) => {
      const row = result.rows[0] as { read?: number; deleted?: number } | undefined;
      if (result.rows.length === 1 && row?.read !== undefined) batches.push({ read: row.read, deleted: row.deleted! });
      return result;
    },
  };
  return { db: target.withPlugin(plugin), batches };
}

describe('webhook delivery purge', () => {
  it('deletes exactly the finished deliveries past retention, with their attempts, per shop', async () => {
    const byDefault = await shop('Default');
    const short = await shop('One day', 1);
    const long = await shop('Ninety days', 90);
    const gone = [
      await delivery(byDefault, 31 * DAY),
      await delivery(byDefault, 40 * DAY, { status: 'failed' }),
      await delivery(byDefault, 45 * DAY, { status: 'cancelled' }),
      await delivery(short, 2 * DAY),
      await delivery(short, 31 * DAY),
      await delivery(long, 91 * DAY),
    ];
    const kept = [
      await delivery(byDefault, 29 * DAY),
      await delivery(byDefault, 31 * DAY, { status: 'retrying', due: true }), // a retry still to come
      await delivery(byDefault, 31 * DAY, { status: 'pending', due: true }), // its endpoint is disabled, say
      await delivery(byDefault, 31 * DAY, { status: 'sending' }), // a worker holds it
      await delivery(short, 12 * HOUR),
      await delivery(long, 31 * DAY),
      await delivery(long, 89 * DAY),
    ];
    expect(await purgeDeliveries(db, ago(30 * DAY), { batchSize: 2, pauseMs: 0 })).toBe(gone.length);
    expect(await ids('webhook_deliveries')).toEqual([...kept].sort());
    const attempts = await db.selectFrom('webhook_delivery_attempts').select('delivery_id').execute();
    expect(attempts.map((a) => a.delivery_id).sort()).toEqual([...kept].sort());
    expect(await purgeDeliveries(db, ago(30 * DAY))).toBe(0);
  });

  it('walks in bounded batches, reading each row once, also the rows it passes over', async () => {
    const byDefault = await shop('Default');
    const long = await shop('Ninety days', 90);
    for (let i = 0; i < 10; i++) await delivery(byDefault, 31 * DAY + i * HOUR);
    // Kept by their shop's retention: passed over, once, by the walk.
    for (let i = 0; i < 4; i++) await delivery(long, 35 * DAY + i * HOUR);
    // Still due: not in the index the purge walks at all.
    for (let i = 0; i < 5; i++) await delivery(byDefault, 32 * DAY + i * HOUR, { status: 'retrying', due: true });
    const probe = batchesOf(db);
    expect(await purgeDeliveries(probe.db, ago(30 * DAY), { batchSize: 3, pauseMs: 0 })).toBe(10);
    expect(probe.batches.every((b) => b.read <= 3)).toBe(true);
    expect(probe.batches.reduce((sum, b) => sum + b.read, 0)).toBe(14);
    expect(probe.batches).toHaveLength(5); // 3 + 3 + 3 + 3 + 2 rows read
  });

  it('deletes every delivery of a relay batch created in the same millisecond, in batches smaller than it', async () => {
    const byDefault = await shop('Default');
    const same = ago(31 * DAY);
    const created = [];
    for (let i = 0; i < 7; i++) created.push(await delivery(byDefault, 31 * DAY));
    await db.updateTable('webhook_deliveries').set({ created_at: same }).execute();
    expect(await purgeDeliveries(db, ago(30 * DAY), { batchSize: 2, pauseMs: 0 })).toBe(7);
  });
});

describe('idempotency key purge', () => {
  it('deletes the keys older than the TTL, in bounded batches, keys created in the same millisecond included', async () => {
    const shopId = await shop('Keys');
    for (let i = 0; i < 10; i++) await idempotencyKey(shopId, `old-${i}`, IDEMPOTENCY_TTL_MS + (i % 3) * 1000 + 1000);
    for (let i = 0; i < 3; i++) await idempotencyKey(shopId, `fresh-${i}`, IDEMPOTENCY_TTL_MS - HOUR);
    const probe = batchesOf(db);
    expect(await purgeExpiredIdempotencyKeys(probe.db, { batchSize: 3, pauseMs: 0, now: new Date(now) })).toBe(10);
    expect(probe.batches.map((b) => b.read)).toEqual([3, 3, 3, 1]);
    const left = await db.selectFrom('idempotency_keys').select('key').orderBy('key').execute();
    expect(left.map((r) => r.key)).toEqual(['fresh-0', 'fresh-1', 'fresh-2']);
  });
});

describe('relayed outbox event purge', () => {
  it('deletes relayed events older than the retention, never an unrelayed one, in bounded batches', async () => {
    const shopId = await shop('Outbox');
    const gone = [];
    const kept = [];
    for (let i = 0; i < 8; i++) gone.push(await outboxEvent(shopId, 3 * DAY - i * HOUR, true));
    kept.push(await outboxEvent(shopId, 2 * DAY, false)); // the relay has not got to it (no worker running, say)
    for (let i = 0; i < 2; i++) gone.push(await outboxEvent(shopId, 2 * DAY - i * HOUR, true));
    kept.push(await outboxEvent(shopId, 12 * HOUR, true), await outboxEvent(shopId, HOUR, false));
    const probe = batchesOf(db);
    expect(await purgeRelayedOutboxEvents(probe.db, ago(DAY), { batchSize: 3, pauseMs: 0 })).toBe(10);
    expect(await ids('outbox_events')).toEqual([...kept].sort());
    // It stops at the batch that reaches an event younger than the retention: 12 rows read, not more.
    expect(probe.batches.map((b) => b.read)).toEqual([3, 3, 3, 3]);
  });

  it('reads one batch when nothing is old enough', async () => {
    const shopId = await shop('Outbox');
    for (let i = 0; i < 10; i++) await outboxEvent(shopId, HOUR, true);
    const probe = batchesOf(db);
    expect(await purgeRelayedOutboxEvents(probe.db, ago(DAY), { batchSize: 3, pauseMs: 0 })).toBe(0);
    expect(probe.batches).toEqual([{ read: 3, deleted: 0 }]);
  });
});

describe('purges beside live traffic', () => {
  it('lose nothing that was acknowledged while they run', async () => {
    const shopId = await shop('Busy');
    const customers = ['c1', 'c2', 'c3', 'c4'];
    // Enough old rows that each purge takes many batches.
    await sql`
      insert into webhook_deliveries (id, shop_id, subscription_id, event_id, topic, status, payload, created_at)
      select 'old' || i, ${shopId}, 'sub_1', 'evt_old' || i, 'points/added', 'succeeded', '{}', ${ago(40 * DAY)}::timestamptz + i * interval '1 ms'
      from generate_series(1, 600) i`.execute(db);
    await sql`
      insert into idempotency_keys (shop_id, key, request_hash, created_at)
      select ${shopId}, 'old' || i, 'h', ${ago(2 * DAY)}::timestamptz + i * interval '1 ms' from generate_series(1, 600) i`.execute(db);
    await sql`
      insert into outbox_events (id, shop_id, type, data, created_at, relayed_at)
      select 'evt_old' || i, ${shopId}, 'points/added', '{}', ${ago(2 * DAY)}::timestamptz + i * interval '1 ms', ${ago(2 * DAY)}
      from generate_series(1, 600) i`.execute(db);
    // After the old events: the outbox purge stops at the first event younger than its retention.
    for (const c of customers) await upsertCustomer(db, shopId, { shopifyCustomerId: c, email: `${c}@example.com` });

    const options = { batchSize: 20, pauseMs: 1 };
    let purging = true;
    const purges = Promise.all([
      purgeDeliveries(db, ago(30 * DAY), options),
      purgeExpiredIdempotencyKeys(db, options),
      purgeRelayedOutboxEvents(db, ago(DAY), options),
    ]).finally(() => {
      purging = false;
    });
    const acknowledged = new Map<string, number>(customers.map((c) => [c, 0]));
    let changes = 0;
    let keys = 0;
    const liveDeliveries: string[] = [];
    const live = customers.map(async (c, n) => {
      while (purging || changes < 40) {
        // As requests arriving on sockets do: on PGlite, a loop of queries alone would never let a timer (the purge's pause) fire.
        await setImmediate();
        await changePoints(db, shopId, 'add', { customerIdentifier: c, amount: 1 + n });
        acknowledged.set(c, acknowledged.get(c)! + 1 + n);
        changes++;
        expect((await claimIdempotencyKey(db, shopId, `live-${c}-${changes}`, 'h')).kind).toBe('claimed');
        keys++;
        await inTransaction(db, async (trx) => {
          await recordEvent(trx, shopId, 'customers/updated', { c });
        });
        liveDeliveries.push(await delivery(shopId, 0));
      }
    });
    expect(await purges).toEqual([600, 600, 600]);
    await Promise.all(live);

    for (const c of customers) {
      const customer = await db.selectFrom('customers').select(['id', 'points']).where('shop_id', '=', shopId).where('shopify_customer_id', '=', c).executeTakeFirstOrThrow();
      expect(customer.points).toBe(acknowledged.get(c));
      const ledger = await db.selectFrom('activities').select(['old_points', 'new_points']).where('customer_id', '=', customer.id).orderBy('seq').execute();
      // The ledger is unbroken: each entry starts where the previous one ended, and ends at the balance.
      ledger.forEach((entry, i) => expect(entry.old_points).toBe(i === 0 ? 0 : ledger[i - 1]!.new_points));
      expect(ledger.at(-1)!.new_points).toBe(customer.points);
    }
    const events = await db.selectFrom('outbox_events').select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow();
    // Each customer's creation, then per change its points event and the customers/updated one.
    expect(Number(events.n)).toBe(customers.length + 2 * changes);
    const liveKeys = await db.selectFrom('idempotency_keys').select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow();
    expect(Number(liveKeys.n)).toBe(keys);
    expect(await ids('webhook_deliveries')).toEqual(liveDeliveries.sort());
  });
});

describe('the retention loop', () => {
  it('purges all five tables once the worker starts, with the configured outbox retention, and vacuums them', async () => {
    const pgSchema = onPostgres ? await isolatedPostgresUrl() : undefined;
    const config = loadConfig({
      PORT: '0',
      DATA_DIR: 'memory://',
      LOG_LEVEL: 'silent',
      OUTBOX_RETENTION_HOURS: '2',
      ...(pgSchema ? { DATABASE_URL: pgSchema.url } : {}),
    });
    const app = await buildApp(config, { logger: createLogger('silent') });
    try {
      const appDb = app.database.db;
      const { shop } = await createShop(appDb, 'Loop');
      const event = async (age: number, relayed: boolean) => {
        const id = `evt_${newId()}`;
        await appDb.insertInto('outbox_events').values({ id, shop_id: shop.id, type: 'points/added', data: '{}', created_at: ago(age), relayed_at: relayed ? ago(age) : null }).execute();
        return id;
      };
      await event(3 * HOUR, true);
      const recent = await event(HOUR, true);
      await appDb.insertInto('idempotency_keys').values([
        { shop_id: shop.id, key: 'old', request_hash: 'h', created_at: ago(IDEMPOTENCY_TTL_MS + HOUR) },
        { shop_id: shop.id, key: 'new', request_hash: 'h', created_at: ago(HOUR) },
      ]).execute();
      await appDb.insertInto('webhook_deliveries').values([
        { id: newId(), shop_id: shop.id, subscription_id: 'sub_1', event_id: 'evt_a', topic: 'points/added', status: 'succeeded', created_at: ago(31 * DAY) },
        { id: newId(), shop_id: shop.id, subscription_id: 'sub_1', event_id: 'evt_b', topic: 'points/added', status: 'succeeded', created_at: ago(29 * DAY) },
      ]).execute();
      const inbox = (webhookId: string, processedAgo: number | null) => ({
        id: newId(), shop_id: shop.id, webhook_id: webhookId, topic: 'customers/update', body: '{}',
        processed_at: processedAgo === null ? null : ago(processedAgo), received_at: ago(9 * DAY), next_attempt_at: ago(-HOUR),
      });
      await appDb.insertInto('shopify_inbox').values([inbox('old', 8 * DAY), inbox('recent', 6 * DAY), inbox('waiting', null)]).execute();
      await appDb.insertInto('customers').values({ id: 'cus_tokens', shop_id: shop.id, shopify_customer_id: 'tokens', email: 'tokens@example.com' }).execute();
      const token = (prefix: string, expiredAgo: number) => ({ id: newId(), shop_id: shop.id, customer_id: 'cus_tokens', prefix, token_hash: 'h', expires_at: ago(expiredAgo) });
      await appDb.insertInto('customer_access_tokens').values([token('oldexpired', 2 * DAY), token('justexpire', HOUR), token('stillvalid', -HOUR)]).execute();
      const left = async () => ({
        events: (await appDb.selectFrom('outbox_events').select('id').execute()).map((r) => r.id),
        keys: (await appDb.selectFrom('idempotency_keys').select('key').execute()).map((r) => r.key),
        deliveries: (await appDb.selectFrom('webhook_deliveries').select('event_id').execute()).map((r) => r.event_id),
        inbox: (await appDb.selectFrom('shopify_inbox').select('webhook_id').orderBy('webhook_id').execute()).map((r) => r.webhook_id),
        tokens: (await appDb.selectFrom('customer_access_tokens').select('prefix').orderBy('prefix').execute()).map((r) => r.prefix),
      });
      const purgesStarted = new Date();
      app.startWorker();
      await until(async () => !(await left()).tokens.includes('oldexpired'), 10_000, 'the customer access token purge, the last of the five');
      expect(await left()).toEqual({ events: [recent], keys: ['new'], deliveries: ['evt_b'], inbox: ['recent', 'waiting'], tokens: ['justexpire', 'stillvalid'] });
      // Each table it deleted from is vacuumed and analysed right after, once its purge is done.
      const purged = ['idempotency_keys', 'webhook_deliveries', 'outbox_events', 'shopify_inbox', 'customer_access_tokens'];
      const vacuumed = async () =>
        (
          await sql<{ relname: string; n_dead_tup: string; vacuumed: boolean; analysed: boolean }>`
            select relname, n_dead_tup, last_vacuum >= ${purgesStarted} as vacuumed, last_analyze >= ${purgesStarted} as analysed
            from pg_stat_user_tables where schemaname = current_schema() and relname = any(${purged}) order by relname`.execute(appDb)
        ).rows.map((r) => ({ table: r.relname, dead: Number(r.n_dead_tup), vacuumed: r.vacuumed, analysed: r.analysed }));
      // No dead rows left for the next run, as pg_stat_user_tables counts them. Only on PGlite is that
      // count certain: on PostgreSQL, other sessions (CI's other test files) may hold back what a
      // vacuum can remove, and a connection reports its deletes up to 10 s after them.
      const done = (t: { vacuumed: boolean; analysed: boolean; dead: number }) => t.vacuumed && t.analysed && (onPostgres || t.dead === 0);
      await until(async () => (await vacuumed()).every(done), 20_000, 'the vacuum after the last purge');
      expect(await vacuumed()).toEqual([...purged].sort().map((table) => ({ table, dead: onPostgres ? expect.any(Number) : 0, vacuumed: true, analysed: true })));
    } finally {
      await app.stop();
    }
  });
});

// PGlite only: see above why PostgreSQL's count of dead rows is not certain.
describe.skipIf(onPostgres)('the vacuum after a purge', () => {
  it("leaves the statistics with no dead rows when the purge's own report of its deletes is still pending", async () => {
    const deadRows = async () =>
      Number(
        (await sql<{ n: string }>`select n_dead_tup as n from pg_stat_user_tables where schemaname = current_schema() and relname = 'idempotency_keys'`.execute(db))
          .rows[0]!.n,
      );
    const shopId = await shop('Statistics');
    // A backend reports its statistics at most once a second: a report now makes the deletes' wait.
    await new Promise((r) => setTimeout(r, 1_100));
    await sql`select 1`.execute(db);
    await db
      .insertInto('idempotency_keys')
      .values(Array.from({ length: 300 }, (_, i) => ({ shop_id: shopId, key: `stale-${i}`, request_hash: 'h', created_at: ago(IDEMPOTENCY_TTL_MS + HOUR) })))
      .execute();
    expect(await purgeExpiredIdempotencyKeys(db)).toBe(300);
    await vacuumPurged(handle, ['idempotency_keys']);
    // Past the second, every pending report has landed: none came after the vacuum's.
    await new Promise((r) => setTimeout(r, 1_100));
    await sql`select 1`.execute(db);
    expect(await deadRows()).toBe(0);
  });
});

describe.skipIf(!onPostgres)('purge plans (PostgreSQL)', () => {
  /** Every statement `run` sends, with its parameters, in a transaction rolled back afterwards. */
  async function statements(run: (logged: DB) => Promise<unknown>) {
    const seen: Array<{ sql: string; parameters: readonly unknown[] }> = [];
    const pool = new pg.Pool({ connectionString: handle.url, max: 1 });
    const logged = new Kysely<Database>({
      dialect: new PostgresDialect({ pool }),
      log: (event) => {
        if (event.level === 'query') seen.push({ sql: event.query.sql, parameters: event.query.parameters });
      },
    });
    const rollback = new Error('rollback');
    try {
      await logged.transaction().execute(async (trx) => {
        await run(trx);
        throw rollback;
      });
    } catch (err) {
      if (err !== rollback) throw err;
    } finally {
      await logged.destroy();
    }
    return seen;
  }

  /** The scans of a statement's plan, as "node type on relation using index". */
  async function scans(statement: { sql: string; parameters: readonly unknown[] }): Promise<string[]> {
    const { rows } = await sql<{ 'QUERY PLAN': unknown }>`explain (format json) ${sql.raw(inline(statement))}`.execute(db);
    const found: string[] = [];
    const walk = (node: any) => {
      if (node['Relation Name'] && node['Node Type'] !== 'ModifyTable') found.push(`${node['Node Type']} on ${node['Relation Name']}${node['Index Name'] ? ` using ${node['Index Name']}` : ''}`);
      for (const child of node.Plans ?? []) walk(child);
    };
    walk((rows[0]!['QUERY PLAN'] as any[])[0].Plan);
    return found;
  }

  /** The statement with its parameters written in, for EXPLAIN (which takes no parameters). */
  function inline(statement: { sql: string; parameters: readonly unknown[] }): string {
    return statement.sql.replace(/\$(\d+)/g, (_, n) => {
      const value = statement.parameters[Number(n) - 1];
      const text = value instanceof Date ? value.toISOString() : String(value);
      return `'${text.replaceAll("'", "''")}'`;
    });
  }

  it('walk index ranges: no batch statement reads its table sequentially', async () => {
    const shopId = await shop('Large');
    await shop('Short', 1); // a shop of its own retention: its own pass
    // Large enough that a sequential scan would be the planner's choice for a statement without a range.
    await sql`
      insert into webhook_deliveries (id, shop_id, subscription_id, event_id, topic, status, payload, created_at, due_at)
      select lpad(i::text, 12, '0'), ${shopId}, 'sub_1', 'evt_' || i, 'points/added', 'succeeded', '{}',
        ${ago(60 * DAY)}::timestamptz + i * interval '1 minute', case when i % 10 = 0 then now() end
      from generate_series(1, 50000) i`.execute(db);
    await sql`
      insert into idempotency_keys (shop_id, key, request_hash, created_at)
      select ${shopId}, 'k' || i, 'h', ${ago(3 * DAY)}::timestamptz + i * interval '5 seconds' from generate_series(1, 50000) i`.execute(db);
    await sql`
      insert into outbox_events (id, shop_id, type, data, created_at, relayed_at)
      select 'evt_' || i, ${shopId}, 'points/added', '{}', ${ago(3 * DAY)}::timestamptz + i * interval '5 seconds', now()
      from generate_series(1, 50000) i`.execute(db);
    await sql`
      insert into shopify_inbox (id, shop_id, webhook_id, topic, body, processed_at)
      select 'in_' || i, ${shopId}, 'w' || i, 'customers/update', '{}', ${ago(10 * DAY)}::timestamptz + i * interval '5 seconds'
      from generate_series(1, 50000) i`.execute(db);
    await sql`insert into customers (id, shop_id, shopify_customer_id, email) values ('cus_plan', ${shopId}, 'plan', 'plan@example.com')`.execute(db);
    await sql`
      insert into customer_access_tokens (id, shop_id, customer_id, prefix, token_hash, expires_at)
      select 'ct_' || i, ${shopId}, 'cus_plan', lpad(i::text, 10, '0'), 'h', ${ago(3 * DAY)}::timestamptz + i * interval '5 seconds'
      from generate_series(1, 50000) i`.execute(db);
    await sql`analyze`.execute(db);

    // Each purge's second batch (one that starts from a position), explained against the full tables.
    const batches = await statements(async (logged) => {
      await purgeDeliveries(logged, ago(30 * DAY), { batchSize: 500, pauseMs: 0 });
      await purgeExpiredIdempotencyKeys(logged, { batchSize: 500, pauseMs: 0 });
      await purgeRelayedOutboxEvents(logged, ago(DAY), { batchSize: 500, pauseMs: 0 });
      await purgeProcessedShopifyWebhooks(logged, ago(7 * DAY), { batchSize: 500, pauseMs: 0 });
      await purgeExpiredCustomerAccessTokens(logged, ago(DAY), { batchSize: 500, pauseMs: 0 });
    });
    const second = (table: string) => batches.filter((s) => s.sql.replaceAll('"', '').includes(`from ${table}`) && s.sql.includes('delete'))[1]!;
    for (const table of ['webhook_deliveries', 'idempotency_keys', 'outbox_events', 'shopify_inbox', 'customer_access_tokens']) {
      const plan = await scans(second(table));
      expect(plan.filter((scan) => scan.startsWith('Seq Scan')), `${table}: ${plan.join('; ')}`).toEqual([]);
      expect(plan.some((scan) => scan.includes(`on ${table} using`)), `${table}: ${plan.join('; ')}`).toBe(true);
    }
  });
});
