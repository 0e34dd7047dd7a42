/**
 * kill -9 of one instance under load loses nothing that was acknowledged.
 *
 * Two server processes share a PostgreSQL schema (and a Redis when TEST_REDIS_URL is set). 300
 * writes (1,000 in the long form) are in flight over both, REST and GraphQL, when one process is
 * killed with SIGKILL: no shutdown, no drain. It proves:
 * - every write that got a 2xx is in the ledger (by activity `_id`), and balances equal ledger sums;
 * - every committed event (the outbox) reaches the webhook receiver, including those the dead
 *   process had claimed: the survivor takes over its delivery leases once they expire
 *   (WEBHOOK_TIMEOUT_MS=1000 makes the lease 2 × 1 s + 2 s);
 * - the killed instance, restarted, serves again (/healthz, /readyz and a write).
 * PostgreSQL only: PGlite is one process.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { onPostgres } from '../helpers.js';
import { type Receiver, startReceiver } from '../webhook-receiver.js';
import { addPoints, checkLedger, killAllServers, pool, scaled, type ServerProcess, sharedDatabase, startServerProcess, waitUntil, type WriteResult } from './processes.js';

const REDIS_URL = process.env.TEST_REDIS_URL;
const WRITES = scaled(300, 1_000);

describe.skipIf(!onPostgres)('SIGKILL of one of two instances mid-load', () => {
  let db: Awaited<ReturnType<typeof sharedDatabase>>;
  let receiver: Receiver;
  let env: Record<string, string>;

  beforeAll(async () => {
    db = await sharedDatabase(20);
    receiver = await startReceiver();
    env = {
      DATABASE_URL: db.url,
      ...(REDIS_URL ? { REDIS_URL, REDIS_KEY_PREFIX: `test:${randomBytes(6).toString('hex')}:` } : {}),
      WEBHOOK_ALLOWED_HOSTS: 'localhost',
      WEBHOOK_TIMEOUT_MS: '1000',
      RATE_LIMIT_PER_MINUTE: '100000',
      DATABASE_POOL_SIZE: '10',
    };
  });
  afterAll(async () => {
    await killAllServers();
    await receiver?.close();
    await db?.close();
  });

  it(`${WRITES} writes in flight, one instance killed: every acknowledged write kept, every event delivered`, { timeout: 300_000 }, async () => {
    let [victim, survivor] = (await Promise.all([startServerProcess(env), startServerProcess(env)])) as [ServerProcess, ServerProcess];
    const created = await fetch(`${survivor.url}/rest-api/v1/webhooks/subscriptions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${db.apiKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ topic: 'points/added', callbackUrl: receiver.url }),
    });
    expect(created.status).toBe(201);
    // The receiver is slow enough that the victim holds deliveries in flight when it dies.
    receiver.handle((_req, res) => setTimeout(() => res.writeHead(204).end(), 50));

    let acknowledged = 0;
    let killedAt = 0;
    const results = await pool(Array.from({ length: WRITES }, (_, i) => i), 24, async (i): Promise<WriteResult & { on: 'victim' | 'survivor' }> => {
      const on = i % 2 ? 'survivor' : 'victim';
      const server = on === 'victim' ? victim : survivor;
      const result = await addPoints(server.url, db.apiKey, i % 4 < 2 ? 'rest' : 'graphql', db.ids[i % db.ids.length]!);
      if (result.status === 200 && ++acknowledged === Math.floor(WRITES / 3)) {
        killedAt = Date.now();
        victim.child.kill('SIGKILL'); // a third acknowledged: the rest are in flight or still to come
      }
      return { ...result, on };
    });
    expect(killedAt).toBeGreaterThan(0);
    expect((await victim.exited).signal).toBe('SIGKILL');

    const ok = results.filter((r) => r.status === 200 && r.activityId);
    const lost = results.filter((r) => r.status !== 200);
    // Only the victim's requests may fail (no answer, or the socket cut); the survivor's all succeed.
    expect(results.filter((r) => r.on === 'survivor' && r.status !== 200)).toEqual([]);
    expect(lost.every((r) => r.status === 0)).toBe(true);
    expect(lost.length).toBeGreaterThan(0);
    console.info(`kill -9: ${ok.length} acknowledged, ${lost.length} unanswered after the kill`);

    const ledger = await checkLedger(db.db, db.shopId);
    expect(ledger.problems).toEqual([]);
    expect(ok.filter((r) => !ledger.activityIds.has(r.activityId!))).toEqual([]);
    // A write the victim committed but could not answer is in the ledger, not acknowledged: allowed.
    expect(ledger.activityIds.size).toBeGreaterThanOrEqual(ok.length);

    // Every committed event reaches the receiver, the victim's claimed ones after their lease.
    const events = await db.db.selectFrom('outbox_events').select('id').where('shop_id', '=', db.shopId).where('type', '=', 'points/added').execute();
    expect(events).toHaveLength(ledger.activityIds.size);
    const received = () => new Set(receiver.requests.map((r) => r.headers['webhook-id']));
    const deadline = Date.now() + 60_000;
    while (events.some((e) => !received().has(e.id)) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 200));
    expect(events.filter((e) => !received().has(e.id))).toEqual([]);
    console.info(`kill -9: all ${events.length} events delivered ${((Date.now() - killedAt) / 1000).toFixed(1)} s after the kill`);
    // Sends the victim made but never recorded are made again by the survivor once their lease
    // ends (same webhook-id, so a receiver dedupes them); then every delivery is settled.
    const unsettled = () => db.db.selectFrom('webhook_deliveries').select(['id', 'status']).where('shop_id', '=', db.shopId).where('status', '!=', 'succeeded').execute();
    await waitUntil(async () => (await unsettled()).length === 0, 30_000, 'every delivery to be recorded as succeeded');
    const resent = receiver.requests.length - received().size;
    console.info(`kill -9: every delivery settled ${((Date.now() - killedAt) / 1000).toFixed(1)} s after the kill; ${resent} sent again after the victim's lease`);

    // The killed instance comes back and serves.
    victim = await startServerProcess(env);
    expect((await fetch(`${victim.url}/healthz`)).status).toBe(200);
    expect((await fetch(`${victim.url}/readyz`)).status).toBe(200);
    const after = await addPoints(victim.url, db.apiKey, 'rest', 'c-0');
    expect(after.status).toBe(200);
    const final = await checkLedger(db.db, db.shopId);
    expect(final.problems).toEqual([]);
    expect(final.activityIds.has(after.activityId!)).toBe(true);
  });
});
