/**
 * Two instances, one PostgreSQL database, one Redis: the scaled-out deployment behaves as one.
 *
 * Two `node --import tsx src/main.ts` processes share a database schema and a Redis (keys under a
 * prefix of this test's own). It proves, with 300 writes (1,000 in the long form) spread over
 * both instances and both faces (REST `POST /points/add`, GraphQL `pointsAdd`):
 * - every write succeeds and balances equal ledger sums, the entries chaining without a gap;
 * - a shop's rate limit is one limit: the writes allowed across both instances together equal it;
 * - a webhook subscription to a healthy receiver gets every event exactly once (distinct
 *   webhook-ids = successful writes, no repeats), whichever instance relayed it;
 * - a graphql-ws subscriber on each instance hears every event, whichever instance committed it.
 * PostgreSQL and Redis only (TEST_DATABASE_URL and TEST_REDIS_URL): PGlite is one process.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { upsertCustomer } from '../../src/domain/program/sign-up.js';
import { createShop } from '../../src/domain/shops/shops.js';
import { onPostgres } from '../helpers.js';
import { collect, type Collected, wsClient } from '../live-helpers.js';
import { type Receiver, startReceiver } from '../webhook-receiver.js';
import { addPoints, checkLedger, killAllServers, pool, scaled, type ServerProcess, sharedDatabase, startServerProcess, waitUntil } from './processes.js';

const REDIS_URL = process.env.TEST_REDIS_URL;
const WRITES = scaled(300, 1_000);
const EVENTS = 'subscription { events(topics: ["points/*"]) { id type shopId } }';

describe.skipIf(!onPostgres || !REDIS_URL)('two server processes on one PostgreSQL and one Redis', () => {
  let db: Awaited<ReturnType<typeof sharedDatabase>>;
  let receiver: Receiver;
  let servers: ServerProcess[];

  beforeAll(async () => {
    db = await sharedDatabase(20);
    receiver = await startReceiver();
    const env = {
      DATABASE_URL: db.url,
      REDIS_URL: REDIS_URL!,
      REDIS_KEY_PREFIX: `test:${randomBytes(6).toString('hex')}:`,
      WEBHOOK_ALLOWED_HOSTS: 'localhost',
      RATE_LIMIT_PER_MINUTE: '100000',
      DATABASE_POOL_SIZE: '10',
    };
    servers = await Promise.all([startServerProcess(env), startServerProcess(env)]);
  });
  afterAll(async () => {
    await killAllServers();
    await receiver?.close();
    await db?.close();
  });

  it(`${WRITES} REST and GraphQL writes over both: exact ledger, every webhook once, every subscriber hears every event`, { timeout: 300_000 }, async () => {
    const [a, b] = servers as [ServerProcess, ServerProcess];
    const created = await fetch(`${a.url}/rest-api/v1/webhooks/subscriptions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${db.apiKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ topic: 'points/added', callbackUrl: receiver.url }),
    });
    expect(created.status).toBe(201);

    const clients = servers.map((s) => wsClient(s.url, db.apiKey));
    const heard: Collected[] = clients.map((c) => collect(c, EVENTS));
    const writes: Array<{ status: number; activityId?: string }> = [];
    try {
      // A subscription is live once it hears something: write until both have.
      await waitUntil(
        async () => {
          writes.push(await addPoints(a.url, db.apiKey, 'rest', 'c-0'));
          await new Promise((r) => setTimeout(r, 100));
          return heard.every((h) => h.results.length > 0);
        },
        15_000,
        'both graphql-ws subscriptions to hear a warm-up write',
      );

      // Warm-up writes made before the second subscription was live need not reach it.
      const warmUps = writes.length;
      const started = Date.now();
      writes.push(
        ...(await pool(Array.from({ length: WRITES }, (_, i) => i), 16, (i) =>
          addPoints(servers[i % 2]!.url, db.apiKey, i % 4 < 2 ? 'rest' : 'graphql', db.ids[i % db.ids.length]!, 1 + (i % 5)),
        )),
      );
      const seconds = (Date.now() - started) / 1000;
      const ok = writes.filter((w) => w.status === 200 && w.activityId);
      expect(writes.filter((w) => !ok.includes(w)).map((w) => w.status)).toEqual([]);
      console.info(`two instances: ${WRITES} writes in ${seconds.toFixed(1)} s (${Math.round(WRITES / seconds)}/s)`);

      // Webhooks: every committed event once, whichever instance relayed and sent it.
      await receiver.waitFor(ok.length, 60_000);
      await new Promise((r) => setTimeout(r, 1_000)); // a repeat would have arrived by now
      const ids = receiver.requests.map((r) => r.headers['webhook-id']);
      expect(new Set(ids).size).toBe(ok.length);
      expect(ids).toHaveLength(ok.length);
      const delivered = new Set(receiver.requests.map((r) => (JSON.parse(r.body) as { data: { _id: string } }).data._id));
      expect(ok.filter((w) => !delivered.has(w.activityId!))).toEqual([]);

      // Live events: both subscribers heard every event of the measured writes, once.
      const measured = new Set(writes.slice(warmUps).map((w) => w.activityId).filter(Boolean));
      const measuredEvents = receiver.requests
        .filter((r) => measured.has((JSON.parse(r.body) as { data: { _id: string } }).data._id))
        .map((r) => r.headers['webhook-id']!);
      expect(measuredEvents).toHaveLength(measured.size);
      const heardIds = (h: Collected) => new Set(h.results.map((r) => r.data.events.id as string));
      await waitUntil(() => heard.every((h) => measuredEvents.every((id) => heardIds(h).has(id))), 30_000, 'every event on both subscriptions');
      for (const h of heard) {
        expect(h.failure).toBeUndefined();
        expect(heardIds(h).size).toBe(h.results.length);
        expect([...heardIds(h)].filter((id) => !ids.includes(id))).toEqual([]);
      }

      const ledger = await checkLedger(db.db, db.shopId);
      expect(ledger.problems).toEqual([]);
      expect(ok.filter((w) => !ledger.activityIds.has(w.activityId!))).toEqual([]);
      expect(ledger.activityIds.size).toBe(ok.length);
    } finally {
      for (const h of heard) h.stop();
      await Promise.all(clients.map((c) => c.dispose()));
    }
    // Nothing went wrong on either side.
    for (const s of servers) expect(s.output()).not.toMatch(/"level":(50|60)/);
    expect(b.child.exitCode).toBeNull();
  });

  it('a shop limit is shared: across both instances exactly the limit is allowed', { timeout: 120_000 }, async () => {
    const LIMIT = 40;
    const limited = await sharedDatabaseShop(LIMIT);
    const results = await pool(Array.from({ length: LIMIT * 3 }, (_, i) => i), 12, (i) =>
      addPoints(servers[i % 2]!.url, limited.apiKey, i % 3 ? 'rest' : 'graphql', 'l-0'),
    );
    const allowed = results.filter((r) => r.status === 200);
    const refused = results.filter((r) => r.status === 429);
    expect(allowed).toHaveLength(LIMIT);
    expect(refused).toHaveLength(LIMIT * 2);
    // Both instances let some through: the one limit really was consumed from both.
    expect(results.filter((r, i) => i % 2 === 0 && r.status === 200).length).toBeGreaterThan(0);
    expect(results.filter((r, i) => i % 2 === 1 && r.status === 200).length).toBeGreaterThan(0);
    const row = await db.db.selectFrom('customers').select('points').where('shop_id', '=', limited.shopId).executeTakeFirstOrThrow();
    expect(row.points).toBe(LIMIT);
  });

  /** A second shop in the same schema with its own per-minute limit. */
  async function sharedDatabaseShop(limit: number) {
    const { shop, apiKey } = await createShop(db.db, 'Limited shop');
    await db.db.updateTable('shops').set({ rate_limit_per_minute: limit }).where('id', '=', shop.id).execute();
    await upsertCustomer(db.db, shop.id, { shopifyCustomerId: 'l-0', email: 'l-0@example.com' });
    return { shopId: shop.id, apiKey };
  }
});
