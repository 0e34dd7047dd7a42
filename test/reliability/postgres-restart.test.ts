/**
 * PostgreSQL stops under load and starts again: the server fails fast, stays up and recovers.
 *
 * A throwaway PostgreSQL cluster of the test's own (initdb in a temporary folder, a free port;
 * the machine's cluster is never touched) backs one server process driven by 8 concurrent
 * writers. Mid-load the cluster is stopped (pg_ctl stop -m fast), then started again. It proves:
 * - while it is down, every request is answered quickly (each under 6 s, however long the outage)
 *   with 503 and the JSON error envelope plus Retry-After, never a hang or a 500; /readyz is 503;
 *   the process stays alive;
 * - once it is back, the server recovers by itself (no restart): /readyz 200, writes succeed;
 * - nothing acknowledged was lost: every write that got a 200 is in the ledger and balances equal
 *   ledger sums.
 * Run with TEST_DATABASE_URL only (the PostgreSQL leg): that is where the PostgreSQL server
 * binaries are a given; the PGlite leg is for machines without PostgreSQL. Skipped with the
 * reason when initdb/pg_ctl are missing.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type DB, openDatabase } from '../../src/db/database.js';
import { migrateToLatest } from '../../src/db/migrate.js';
import { upsertCustomer } from '../../src/domain/program/sign-up.js';
import { createShop } from '../../src/domain/shops/shops.js';
import { onPostgres } from '../helpers.js';
import { checkLedger, killAllServers, scaled, type ServerProcess, startServerProcess, startThrowawayPostgres, type ThrowawayPostgres, throwawayPostgresUnavailable, waitUntil } from './processes.js';

const unavailable = onPostgres ? throwawayPostgresUnavailable() : null;
if (unavailable) console.warn(`postgres-restart skipped: ${unavailable}`);
const OUTAGE_MS = scaled(4_000, 15_000);
const BOUND_MS = 6_000;

type Sample = { status: number; ms: number; startedAt: number; activityId?: string; retryAfter?: string | null; envelope?: boolean };

describe.skipIf(!onPostgres || unavailable !== null)('PostgreSQL stopped and started under a running server', () => {
  let cluster: ThrowawayPostgres;
  let server: ServerProcess;
  let db: { db: DB; close(): Promise<void> };
  let shop: { id: string; apiKey: string };

  beforeAll(async () => {
    cluster = await startThrowawayPostgres();
    const handle = await openDatabase({ url: cluster.url, poolSize: 2 });
    await migrateToLatest(handle.db);
    const created = await createShop(handle.db, 'Restart shop');
    shop = { id: created.shop.id, apiKey: created.apiKey };
    for (let i = 0; i < 8; i++) await upsertCustomer(handle.db, shop.id, { shopifyCustomerId: `c-${i}`, email: `c-${i}@example.com` });
    await handle.close();
    server = await startServerProcess({ DATABASE_URL: cluster.url, RATE_LIMIT_PER_MINUTE: '100000', DATABASE_POOL_SIZE: '8' });
  }, 120_000);
  afterAll(async () => {
    await killAllServers();
    await db?.close();
    await cluster?.destroy();
  });

  /** One write, with what an outage check needs from its answer. */
  async function write(i: number): Promise<Sample> {
    const startedAt = Date.now();
    try {
      const res = await fetch(`${server.url}/rest-api/v1/points/add`, {
        method: 'POST',
        headers: { authorization: `Bearer ${shop.apiKey}`, 'content-type': 'application/json' },
        body: JSON.stringify({ customerIdentifier: `c-${i % 8}`, amount: 1 }),
        signal: AbortSignal.timeout(30_000),
      });
      const body = (await res.json()) as { success?: boolean; statusCode?: number; error?: string; message?: string; activity?: { _id: string } };
      return {
        status: res.status,
        ms: Date.now() - startedAt,
        startedAt,
        activityId: res.status === 200 ? body.activity?._id : undefined,
        retryAfter: res.headers.get('retry-after'),
        envelope: body.success === false && body.statusCode === res.status && typeof body.error === 'string' && typeof body.message === 'string',
      };
    } catch {
      return { status: 0, ms: Date.now() - startedAt, startedAt };
    }
  }

  it('answers 503 fast while it is down, recovers by itself, loses nothing acknowledged', { timeout: 180_000 }, async () => {
    const samples: Sample[] = [];
    let running = true;
    let n = 0;
    const load = Promise.all(
      Array.from({ length: 8 }, async () => {
        while (running) {
          samples.push(await write(n++));
          await new Promise((r) => setTimeout(r, 20));
        }
      }),
    );
    try {
      await waitUntil(() => samples.filter((s) => s.status === 200).length >= 50, 30_000, '50 writes before the stop');

      await cluster.stop('fast');
      const downAt = Date.now();
      const readyDown: number[] = [];
      while (Date.now() - downAt < OUTAGE_MS) {
        if (server.child.exitCode !== null) throw new Error(`the server died with the database: ${server.output().slice(-4_000)}`);
        readyDown.push((await fetch(`${server.url}/readyz`)).status);
        await new Promise((r) => setTimeout(r, 500));
      }
      expect((await fetch(`${server.url}/healthz`)).status).toBe(200);
      expect(server.child.exitCode).toBeNull();
      const upAt = Date.now();
      await cluster.start();
      await waitUntil(async () => (await fetch(`${server.url}/readyz`)).status === 200, 30_000, '/readyz 200 after the restart');
      const readyAt = Date.now();
      await waitUntil(() => samples.filter((s) => s.startedAt > readyAt && s.status === 200).length >= 20, 30_000, '20 writes after recovery');
      running = false;
      await load;

      expect(readyDown.every((s) => s === 503)).toBe(true);
      // Requests made while the cluster was down: each answered 503, in the envelope, with Retry-After, fast.
      const during = samples.filter((s) => s.startedAt > downAt + 100 && s.startedAt + s.ms < upAt);
      expect(during.length).toBeGreaterThan(10);
      expect(during.filter((s) => s.status !== 503 || !s.envelope || !s.retryAfter)).toEqual([]);
      expect(Math.max(...during.map((s) => s.ms))).toBeLessThan(BOUND_MS);
      // No request at any point got a 500 or no answer; those cut by the stop are 503 too.
      expect(samples.filter((s) => s.status !== 200 && s.status !== 503)).toEqual([]);
      const slowest = Math.max(...samples.filter((s) => s.status === 503).map((s) => s.ms));
      console.info(
        `postgres restart: ${samples.length} writes, ${during.length} during a ${(upAt - downAt) / 1000} s outage (all 503, slowest 503 ${slowest} ms); ready again ${((readyAt - upAt) / 1000).toFixed(1)} s after the start`,
      );
    } finally {
      running = false;
      await load;
    }

    const handle = await openDatabase({ url: cluster.url, poolSize: 2 });
    db = handle;
    const ledger = await checkLedger(handle.db, shop.id);
    expect(ledger.problems).toEqual([]);
    const acknowledged = samples.filter((s) => s.status === 200);
    expect(acknowledged.filter((s) => !ledger.activityIds.has(s.activityId!))).toEqual([]);
    expect((await fetch(`${server.url}/healthz`)).status).toBe(200);
  });
});
