import { setTimeout as sleep } from 'node:timers/promises';
import { sql } from 'kysely';
import type { DB } from '../db/database.js';
import { inTransaction, type Trx } from '../db/transaction.js';
import { type EventTopic, onOutboxCommit } from '../domain/kernel/index.js';
import type { Logger } from '../logger.js';
import { wakeableSleep } from './wakeable-sleep.js';

/** An event as it left the outbox. */
export type OutboxEvent = {
  seq: number;
  id: string;
  shopId: string;
  type: EventTopic;
  data: unknown;
  createdAt: Date;
};

/** The envelope every consumer sees (DESIGN.md "Webhooks": the delivery body). */
export type EventEnvelope = { id: string; type: EventTopic; timestamp: string; shopId: string; data: unknown };

export function toEnvelope(event: OutboxEvent): EventEnvelope {
  return { id: event.id, type: event.type, timestamp: event.createdAt.toISOString(), shopId: event.shopId, data: event.data };
}

export type OutboxHandler = {
  name: string;
  /** Durable work, inside the relay's transaction: it commits together with "relayed". */
  inTransaction?(trx: Trx, events: OutboxEvent[]): Promise<void>;
  /** Best-effort work once the batch has committed (live subscribers, waking a worker). */
  afterCommit?(events: OutboxEvent[]): void | Promise<void>;
};

export type OutboxRelay = {
  start(): void;
  stop(): Promise<void>;
  /** Relays one batch now; resolves to the number of events relayed. */
  relayBatch(): Promise<number>;
};

/**
 * Moves committed events out of the outbox to their consumers. Any number of relays (one per
 * instance) can run: each claims a batch with FOR UPDATE SKIP LOCKED, so every event is relayed
 * exactly once. A relay wakes at once when this process commits events, and polls for the rest.
 */
export function createOutboxRelay(options: {
  db: DB;
  logger: Logger;
  handlers: OutboxHandler[];
  batchSize?: number;
  pollMs?: number;
  coalesceMs?: number;
}): OutboxRelay {
  const { db, logger, handlers, batchSize = 200, pollMs = 250, coalesceMs = 10 } = options;
  let running = false;
  let loop: Promise<void> | undefined;
  let pending = false; // a commit happened since the last batch started
  const idle = wakeableSleep();
  let unsubscribe: (() => void) | undefined;

  async function relayBatch(): Promise<number> {
    pending = false;
    const events = await inTransaction(db, async (trx) => {
      // Claimed and marked in one statement; the mark commits with the handlers' work, or not at all.
      const { rows } = await sql<{ seq: number; id: string; shop_id: string; type: EventTopic; data: unknown; created_at: Date }>`
        update outbox_events set relayed_at = ${new Date()}
        where seq = any(array(select seq from outbox_events where relayed_at is null order by seq limit ${batchSize} for update skip locked))
        returning seq, id, shop_id, type, data, created_at`.execute(trx);
      if (rows.length === 0) return [];
      // RETURNING keeps no order; consumers get events in the order they were written.
      const batch: OutboxEvent[] = rows
        .sort((a, b) => a.seq - b.seq)
        .map((r) => ({ seq: r.seq, id: r.id, shopId: r.shop_id, type: r.type, data: r.data, createdAt: r.created_at }));
      for (const handler of handlers) await handler.inTransaction?.(trx, batch);
      return batch;
    });
    if (events.length) {
      for (const handler of handlers) {
        try {
          await handler.afterCommit?.(events);
        } catch (err) {
          logger.warn({ err, handler: handler.name }, 'outbox handler failed after commit');
        }
      }
    }
    return events.length;
  }

  async function run() {
    while (running) {
      let relayed = 0;
      try {
        relayed = await relayBatch();
      } catch (err) {
        if (!running) break;
        logger.error({ err }, 'outbox relay batch failed; retrying');
        await sleep(pollMs);
        continue;
      }
      if (relayed === batchSize) continue;
      // Commits arrived during the batch: under load, let a few milliseconds of them gather into
      // the next batch rather than paying a relay transaction for every handful of events.
      if (pending) await sleep(coalesceMs);
      else await idle.sleep(pollMs);
    }
  }

  return {
    relayBatch,
    start() {
      if (running) return;
      running = true;
      unsubscribe = onOutboxCommit(() => {
        pending = true;
        idle.wake();
      });
      loop = run();
    },
    async stop() {
      running = false;
      unsubscribe?.();
      idle.wake();
      await loop;
    },
  };
}
