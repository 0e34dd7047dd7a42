import { randomUUID } from 'node:crypto';
import { setMaxListeners } from 'node:events';
import type { DB } from '../db/database.js';
import type { PurgeOptions } from '../db/purge.js';
import type { SecretBox } from '../domain/kernel/index.js';
import { fanOutEvents, onDeliveriesDue, validSigningSecrets } from '../domain/webhooks/index.js';
import { type OutboxHandler, toEnvelope } from '../events/outbox-relay.js';
import { batched } from '../events/batched.js';
import { wakeableSleep } from '../events/wakeable-sleep.js';
import type { Logger } from '../logger.js';
import { type AttemptRecord, cancelClaimed, claimDueDeliveries, type ClaimedDelivery, type DeliveryState, finishAttempts, type FinishedAttempt, handBack, type HealthRules, purgeDeliveries } from './delivery-queue.js';
import { nextRetryDelay, parseRetryAfter } from './retry-schedule.js';
import { type AttemptOutcome, createSender, type Sender } from './sender.js';
import { signedHeaders } from './signing.js';
import type { UrlPolicy } from './url-policy.js';

/** How long the claims of a subscription whose secret cannot be opened here wait before they are claimed again (and the error logged again). */
const UNREADABLE_SECRET_RETRY_MS = 30_000;

export type DeliveryWorkerOptions = {
  db: DB;
  logger: Logger;
  urlPolicy: Pick<UrlPolicy, 'checkCallbackUrl' | 'lookup'>;
  secrets: SecretBox;
  /** Per attempt, connect to last body byte (DESIGN.md: 15 s). */
  timeoutMs?: number;
  /** Attempts in flight at once, per worker. */
  concurrency?: number;
  /** Attempts in flight at once per subscription, over all workers (DESIGN.md "Tenant isolation"); default half of `concurrency`. */
  maxInFlightPerEndpoint?: number;
  /** Consecutive failures after which an endpoint is probed one attempt at a time until a success. */
  probeAfterFailures?: number;
  /** How long an endpoint may fail without a success before it is disabled. */
  disableAfterMs?: number;
  /** How often to look for due deliveries nobody announced (retries, other instances' work). */
  pollMs?: number;
  /** Deliveries older than this, with nothing left to do, are purged. */
  retentionMs?: number;
  /** On stop, how long attempts in flight may finish before they are cut and handed back. */
  stopGraceMs?: number;
  /** The worker's clock (ms since the epoch); tests move it to walk the retry schedule and the health rules. */
  clock?: () => number;
  /** Jitter source, [0, 1). */
  random?: () => number;
  /** Told of every attempt made (for /metrics). */
  onAttempt?: (outcome: AttemptOutcome) => void;
};

export type DeliveryWorker = {
  /** Fans committed events out to deliveries (durable, in the relay's transaction) and wakes the worker. */
  outboxHandler: OutboxHandler;
  start(): void;
  /** Stops claiming, lets attempts in flight finish for a moment, hands the rest back. Safe to call twice. */
  stop(): Promise<void>;
  /** Sends everything due now, and what becomes due meanwhile, until nothing is due (tests, tools). */
  drain(): Promise<number>;
  /** Purges deliveries past retention (the server's purge loop calls it; `purgeDeliveries`). */
  purge(options?: PurgeOptions): Promise<number>;
};

export const DEFAULT_PROBE_AFTER_FAILURES = 5;
export const DEFAULT_DISABLE_AFTER_MS = 5 * 24 * 60 * 60 * 1000;

const USER_AGENT = 'loyalty-service-webhooks/1 (+https://www.standardwebhooks.com)';
const DAY = 24 * 60 * 60 * 1000;

/**
 * Sends webhook deliveries: claims due rows (FOR UPDATE SKIP LOCKED, so any number of workers in
 * any number of processes share the work), signs each with the subscription's current URL and
 * secrets, sends it, records the attempt and schedules the next one (DESIGN.md "Webhooks").
 */
export function createDeliveryWorker(options: DeliveryWorkerOptions): DeliveryWorker {
  const { db, logger, secrets } = options;
  const timeoutMs = options.timeoutMs ?? 15_000;
  // Longer than any attempt can take (the HTTP timeout), with room for the database writes after it.
  const leaseMs = 2 * timeoutMs + 2_000;
  const concurrency = options.concurrency ?? 128;
  // Half the slots: enough for one healthy endpoint's full rate, the other half for everyone else.
  const maxInFlight = Math.max(1, options.maxInFlightPerEndpoint ?? Math.floor(concurrency / 2));
  const health: HealthRules = {
    probeAfterFailures: options.probeAfterFailures ?? DEFAULT_PROBE_AFTER_FAILURES,
    disableAfterMs: options.disableAfterMs ?? DEFAULT_DISABLE_AFTER_MS,
  };
  const pollMs = options.pollMs ?? 1_000;
  const retentionMs = options.retentionMs ?? 30 * DAY;
  const stopGraceMs = options.stopGraceMs ?? 2_000;
  const clock = options.clock ?? Date.now;
  const random = options.random ?? Math.random;
  const now = () => new Date(clock());
  const sender: Sender = createSender({ urlPolicy: options.urlPolicy, timeoutMs });
  // Attempts that finish together are recorded in one statement: a round trip per batch, not per delivery.
  const recordFinished = batched<FinishedAttempt>((items) => finishAttempts(db, items, health));
  // Claim in batches: only once half the slots are free (or none are busy), not one row per finished attempt.
  const claimThreshold = Math.max(1, Math.floor(concurrency / 2));
  // After a claim the per-endpoint caps cut short, the next waits until this many attempts have
  // finished (or new deliveries are announced, or the poll comes round): otherwise an endpoint at
  // its cap would cost a claim per finished attempt.
  const capBatch = Math.max(1, Math.min(claimThreshold, Math.floor(maxInFlight / 2)));

  let running = false;
  let loop: Promise<void> | undefined;
  const idle = wakeableSleep();
  let signalled = false; // new deliveries were announced (or the poll came round) while the loop was busy
  let capped = false; // the last claim took less than it asked for
  let inFlightAfterClaim = 0;
  let unsubscribe: (() => void) | undefined;
  let stopping: Promise<void> | undefined;
  const stopAbort = new AbortController();
  setMaxListeners(concurrency + 1, stopAbort.signal); // every attempt in flight listens for the stop
  const inFlight = new Set<Promise<void>>();

  function signal() {
    signalled = true;
    idle.wake();
  }

  /**
   * The current URL and signing secrets of each subscription (nothing for a deleted one), and the
   * subscriptions whose secrets this instance cannot open (sealed with another SECRETS_KEY, or
   * damaged), with why.
   */
  async function loadTargets(claims: readonly ClaimedDelivery[]) {
    const ids = [...new Set(claims.map((c) => c.subscriptionId))];
    const rows = await db.selectFrom('webhook_subscriptions').select(['id', 'callback_url']).where('id', 'in', ids).execute();
    const at = now();
    const targets = new Map<string, { url: string; secrets: string[] }>();
    const unreadable = new Map<string, unknown>();
    for (const row of rows) {
      try {
        targets.set(row.id, { url: row.callback_url, secrets: await validSigningSecrets({ db, secrets }, row.id, at) });
      } catch (err) {
        unreadable.set(row.id, err);
      }
    }
    return { targets, unreadable };
  }

  function nextState(claimed: ClaimedDelivery, outcome: AttemptOutcome, at: number): DeliveryState {
    if (claimed.trigger === 'manual') {
      // A replay is one extra attempt: success settles the delivery, failure leaves it as it was.
      return outcome.ok
        ? { status: 'succeeded', nextAttemptAt: null, scheduledAttempts: claimed.scheduledAttempts }
        : { status: claimed.statusBeforeSend, nextAttemptAt: claimed.nextAttemptAt, scheduledAttempts: claimed.scheduledAttempts };
    }
    const scheduledAttempts = claimed.scheduledAttempts + 1;
    if (outcome.ok) return { status: 'succeeded', nextAttemptAt: null, scheduledAttempts };
    // 410 Gone: the receiver says this endpoint no longer wants deliveries; retrying cannot help.
    if (outcome.statusCode === 410) return { status: 'failed', nextAttemptAt: null, scheduledAttempts };
    const delay = nextRetryDelay(scheduledAttempts, parseRetryAfter(outcome.retryAfter, at), random);
    return delay === null
      ? { status: 'failed', nextAttemptAt: null, scheduledAttempts }
      : { status: 'retrying', nextAttemptAt: new Date(at + delay), scheduledAttempts };
  }

  async function attempt(claimed: ClaimedDelivery, target: { url: string; secrets: string[] }): Promise<void> {
    const attemptedAt = now();
    const body = claimed.payload;
    const outcome = await sender.send(
      {
        url: target.url,
        body,
        headers: {
          'content-type': 'application/json',
          'user-agent': USER_AGENT,
          ...signedHeaders(target.secrets, claimed.eventId, attemptedAt, body),
          'webhook-topic': claimed.topic,
          'webhook-delivery-id': claimed.id,
        },
      },
      stopAbort.signal,
    );
    if (outcome.aborted) {
      await handBack(db, [claimed], now());
      return;
    }
    options.onAttempt?.(outcome);
    const record: AttemptRecord = {
      attemptedAt,
      url: target.url,
      responseStatus: outcome.statusCode,
      durationMs: outcome.durationMs,
      error: outcome.error,
      responseBody: outcome.responseBody,
    };
    const finishedAt = clock();
    await recordFinished({ claimed, attempt: record, succeeded: outcome.ok, state: nextState(claimed, outcome, finishedAt), now: new Date(finishedAt) });
  }

  function track(task: Promise<void>, claimed: ClaimedDelivery) {
    const tracked = task
      .catch((err) => logger.error({ err, deliveryId: claimed.id }, 'webhook attempt could not be recorded; it is retried when its lease ends'))
      .finally(() => {
        inFlight.delete(tracked);
        idle.wake();
      });
    inFlight.add(tracked);
  }

  /** Claims what fits in the free slots and starts sending it; resolves to the number claimed. */
  async function claimAndStart(limit: number): Promise<number> {
    if (limit <= 0) return 0;
    const claims = await claimDueDeliveries(db, { limit, now: now(), leaseMs, token: randomUUID(), maxInFlight });
    if (claims.length === 0) return 0;
    let loaded: Awaited<ReturnType<typeof loadTargets>>;
    try {
      loaded = await loadTargets(claims);
    } catch (err) {
      await handBack(db, claims, now()).catch(() => {});
      throw err;
    }
    const { targets, unreadable } = loaded;
    // A subscription whose secret this instance cannot open gives its claims back (an instance
    // with the right key may send them) and holds up no other subscription's deliveries.
    const stuck = claims.filter((c) => unreadable.has(c.subscriptionId));
    if (stuck.length) {
      const at = now();
      await handBack(db, stuck, at, new Date(at.getTime() + UNREADABLE_SECRET_RETRY_MS)).catch(() => {});
      for (const [subscriptionId, err] of unreadable) {
        logger.error({ err, subscriptionId }, 'cannot sign this webhook subscription\'s deliveries here; they are left for an instance that can');
      }
    }
    for (const claimed of claims) {
      if (unreadable.has(claimed.subscriptionId)) continue;
      const target = targets.get(claimed.subscriptionId);
      track(target ? attempt(claimed, target) : cancelClaimed(db, claimed, now()), claimed);
    }
    return claims.length;
  }

  async function run() {
    while (running) {
      const free = concurrency - inFlight.size;
      // New deliveries (or the poll) are claimed at once into whatever slots are free: a hung
      // endpoint may hold half of them. Finished attempts only lead to a claim once a batch's worth
      // of slots is free, and after a claim the caps cut short, once that many attempts finished.
      const worthClaiming =
        free > 0 &&
        (signalled || (free >= claimThreshold && (!capped || inFlight.size === 0 || inFlight.size <= inFlightAfterClaim - capBatch)));
      let claimed = 0;
      try {
        if (worthClaiming) {
          signalled = false;
          claimed = await claimAndStart(free);
          capped = claimed < free;
          inFlightAfterClaim = inFlight.size;
        }
      } catch (err) {
        if (!running) break;
        logger.error({ err }, 'claiming webhook deliveries failed; retrying');
      }
      if (!running) break;
      // Claim again at once if a full batch says more may be due and a batch's worth of slots is
      // free, or if new deliveries were announced meanwhile and any slot is. A finished attempt
      // only wakes the loop to re-check.
      const freeNow = concurrency - inFlight.size;
      if ((freeNow >= claimThreshold && claimed > 0 && claimed === free) || (signalled && freeNow > 0)) continue;
      const sleptFrom = Date.now();
      await idle.sleep(pollMs);
      if (Date.now() - sleptFrom >= pollMs) signalled = true; // the poll: look for retries and other processes' work
    }
  }

  async function purge(purgeOptions: PurgeOptions = {}): Promise<number> {
    return purgeDeliveries(db, new Date(clock() - retentionMs), { ...purgeOptions, now: now() });
  }

  return {
    outboxHandler: {
      name: 'webhook-deliveries',
      inTransaction: async (trx, events) => {
        await fanOutEvents(
          trx,
          events.map((event) => ({ id: event.id, shopId: event.shopId, type: event.type, payload: () => JSON.stringify(toEnvelope(event)) })),
          now(),
        );
      },
      // fanOutEvents announces new deliveries after the relay's commit; onDeliveriesDue wakes us.
    },
    start() {
      if (running || stopping) return;
      running = true;
      unsubscribe = onDeliveriesDue(signal);
      loop = run();
    },
    stop() {
      stopping ??= (async () => {
        running = false;
        unsubscribe?.();
        idle.wake();
        await loop;
        if (inFlight.size) {
          let graceTimer: NodeJS.Timeout | undefined;
          const grace = new Promise<void>((resolve) => {
            graceTimer = setTimeout(resolve, stopGraceMs);
          });
          await Promise.race([Promise.all(inFlight), grace]);
          clearTimeout(graceTimer);
          stopAbort.abort(); // whatever is still in flight is handed back, unsent as far as we know
          await Promise.all(inFlight);
        }
        await sender.close();
      })();
      return stopping;
    },
    async drain() {
      let total = 0;
      for (;;) {
        const claimed = await claimAndStart(concurrency);
        await Promise.all(inFlight);
        if (claimed === 0) return total;
        total += claimed;
      }
    },
    purge,
  };
}
