import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type DatabaseHandle, openDatabase } from '../src/db/database.js';
import { inTransaction } from '../src/db/transaction.js';
import { recordEvent } from '../src/domain/kernel/events.js';
import { changePoints } from '../src/domain/ledger/points.js';
import { upsertCustomer } from '../src/domain/program/sign-up.js';
import { createShop } from '../src/domain/shops/shops.js';
import { createOutboxRelay, type OutboxEvent } from '../src/events/outbox-relay.js';
import { createLogger } from '../src/logger.js';
import { onPostgres, openTestDatabase } from './helpers.js';

const logger = createLogger('silent');
let handle: DatabaseHandle & { url?: string };
let shopId: string;

beforeAll(async () => {
  handle = await openTestDatabase();
  ({ shop: { id: shopId } } = await createShop(handle.db, 'Relay shop'));
  await upsertCustomer(handle.db, shopId, { shopifyCustomerId: 'r-1', email: 'r-1@example.com' });
});
afterAll(() => handle?.close());

async function drain(relays: Array<{ relayBatch(): Promise<number> }>) {
  while ((await Promise.all(relays.map((r) => r.relayBatch()))).some((n) => n > 0));
}

describe('outbox relay', () => {
  it('hands each committed event to its handlers once, and wakes at once on a local commit', async () => {
    await drain([createOutboxRelay({ db: handle.db, logger, handlers: [] })]);
    const seen: Array<{ event: OutboxEvent; at: number }> = [];
    const relay = createOutboxRelay({
      db: handle.db,
      logger,
      pollMs: 10_000, // so only the commit signal can explain a prompt hand-over
      handlers: [{ name: 'probe', afterCommit: (events) => void seen.push(...events.map((event) => ({ event, at: Date.now() }))) }],
    });
    relay.start();
    try {
      const started = Date.now();
      const { activity } = await changePoints(handle.db, shopId, 'add', { customerIdentifier: 'r-1', amount: 5 });
      while (seen.length === 0 && Date.now() - started < 5_000) await new Promise((r) => setTimeout(r, 5));
      expect(seen).toHaveLength(1);
      expect(seen[0]!.event).toMatchObject({ type: 'points/added', shopId, data: { _id: activity._id, newPoints: 5 } });
      expect(seen[0]!.at - started).toBeLessThan(1_000);
    } finally {
      await relay.stop();
    }
  });

  it('never relays the event of a rolled-back transaction', async () => {
    const seen: OutboxEvent[] = [];
    const relay = createOutboxRelay({ db: handle.db, logger, handlers: [{ name: 'probe', afterCommit: (e) => void seen.push(...e) }] });
    await expect(
      inTransaction(handle.db, async (trx) => {
        await recordEvent(trx, shopId, 'customers/updated', { rolledBack: true });
        throw new Error('abort');
      }),
    ).rejects.toThrow('abort');
    await drain([relay]);
    expect(seen).toEqual([]);
  });

  it.skipIf(!onPostgres)('splits the work of two relays on one database without duplicates (PostgreSQL)', async () => {
    const other = await openDatabase({ url: handle.url });
    try {
      const seen = new Map<string, number>();
      const count = (events: OutboxEvent[]) => events.forEach((e) => seen.set(e.id, (seen.get(e.id) ?? 0) + 1));
      const a = createOutboxRelay({ db: handle.db, logger, batchSize: 25, handlers: [{ name: 'a', inTransaction: async (_t, e) => count(e) }] });
      const b = createOutboxRelay({ db: other.db, logger, batchSize: 25, handlers: [{ name: 'b', inTransaction: async (_t, e) => count(e) }] });
      await drain([a, b]);
      seen.clear();
      // In waves no larger than the pool, so the pool's fail-fast acquire timeout never fires.
      for (let wave = 0; wave < 10; wave++) {
        await Promise.all(
          Array.from({ length: 30 }, () => changePoints(handle.db, shopId, 'add', { customerIdentifier: 'r-1', amount: 1 })),
        );
      }
      a.start();
      b.start();
      const deadline = Date.now() + 20_000;
      while (seen.size < 300 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
      await Promise.all([a.stop(), b.stop()]);
      expect(seen.size).toBe(300);
      expect([...seen.values()].every((n) => n === 1)).toBe(true);
    } finally {
      await other.close();
    }
  });
});
