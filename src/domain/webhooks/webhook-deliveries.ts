import { EventEmitter } from 'node:events';
import { sql } from 'kysely';
import { z } from 'zod';
import type { DB } from '../../db/database.js';
import type { WebhookAttemptTrigger, WebhookDeliveryAttemptRow, WebhookDeliveryRow, WebhookDeliveryStatus } from '../../db/schema.js';
import { afterCommit, inTransaction, type Queryable, type Trx } from '../../db/transaction.js';
import { type Actor, recordAudit } from '../audit/index.js';
import { beforeTimeCursor, containsAny, encodeTimeCursor, isId, MAX_PAGE_SIZE, newId, nextCursor, NotFoundError, type Page, type PageArgs, parseInput, RuleViolationError, ValidationError } from '../kernel/index.js';

/**
 * Webhook deliveries: one per (event, matching subscription), created when the outbox relay hands
 * an event on, then sent, retried and recorded by the delivery worker (src/webhooks). Records
 * outlive their subscription and stay queryable until the retention purge.
 */
export const DELIVERY_STATUSES = ['pending', 'sending', 'succeeded', 'retrying', 'failed', 'cancelled'] as const satisfies readonly WebhookDeliveryStatus[];

export type WebhookDelivery = {
  id: string;
  subscriptionId: string;
  eventId: string;
  topic: string;
  status: WebhookDeliveryStatus;
  attemptCount: number;
  lastAttemptAt: Date | null;
  /** The next scheduled attempt; null once succeeded, failed or cancelled. */
  nextAttemptAt: Date | null;
  lastResponseStatus: number | null;
  lastError: string | null;
  createdAt: Date;
  updatedAt: Date;
};

export type WebhookDeliveryAttempt = {
  id: string;
  attemptedAt: Date;
  trigger: WebhookAttemptTrigger;
  url: string;
  responseStatus: number | null;
  durationMs: number;
  error: string | null;
  /** The first 2 KiB of the receiver's response body. */
  responseBody: string | null;
};

/** One delivery with everything about it: its attempts (oldest first) and the body as sent. */
export type WebhookDeliveryDetail = WebhookDelivery & {
  attempts: WebhookDeliveryAttempt[];
  /** The envelope exactly as signed and sent (minified JSON). */
  payload: string;
};

export function toWebhookDelivery(row: WebhookDeliveryRow): WebhookDelivery {
  return {
    id: row.id,
    subscriptionId: row.subscription_id,
    eventId: row.event_id,
    topic: row.topic,
    status: row.status,
    attemptCount: row.attempt_count,
    lastAttemptAt: row.last_attempt_at,
    nextAttemptAt: row.next_attempt_at,
    lastResponseStatus: row.last_response_status,
    lastError: row.last_error,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
  };
}

function toAttempt(row: WebhookDeliveryAttemptRow): WebhookDeliveryAttempt {
  return {
    id: row.id,
    attemptedAt: row.attempted_at,
    trigger: row.trigger,
    url: row.url,
    responseStatus: row.response_status,
    durationMs: row.duration_ms,
    error: row.error,
    responseBody: row.response_body,
  };
}

// --- Fan-out --------------------------------------------------------------------------------

/**
 * An event ready to deliver: `payload()` is its envelope as it will be signed and sent, built only
 * for an event some subscription takes (most shops subscribe to few topics, or none).
 */
export type DeliverableEvent = { id: string; shopId: string; type: string; payload(): string };

const INSERT_CHUNK = 1000;

/**
 * Creates the deliveries of committed events, inside the outbox relay's transaction: one per
 * subscription of the event's shop whose topic is the event's type or its `group/*`, due at once.
 * Unique per (event, subscription), so relaying an event twice cannot deliver it twice.
 * Resolves to the number of deliveries created.
 */
export async function fanOutEvents(trx: Trx, events: readonly DeliverableEvent[], now: Date): Promise<number> {
  if (events.length === 0) return 0;
  const shopIds = [...new Set(events.map((e) => e.shopId))];
  const topics = [...new Set(events.flatMap((e) => [e.type, `${e.type.split('/')[0]}/*`]))];
  const subscriptions = await trx
    .selectFrom('webhook_subscriptions')
    .select(['id', 'shop_id', 'topic'])
    .where('shop_id', 'in', shopIds)
    .where('topic', 'in', topics)
    .orderBy('created_at')
    // A subscription being deleted meanwhile waits for this commit (then cancels what we add) or
    // is skipped once gone: no delivery is left due for a subscription that no longer exists.
    .forKeyShare()
    .execute();
  if (subscriptions.length === 0) return 0;
  const byShopTopic = new Map<string, string[]>();
  for (const s of subscriptions) {
    const key = `${s.shop_id} ${s.topic}`;
    byShopTopic.set(key, [...(byShopTopic.get(key) ?? []), s.id]);
  }
  const rows = events.flatMap((event) => {
    const matching = [
      ...(byShopTopic.get(`${event.shopId} ${event.type}`) ?? []),
      ...(byShopTopic.get(`${event.shopId} ${event.type.split('/')[0]}/*`) ?? []),
    ];
    if (matching.length === 0) return [];
    const payload = event.payload();
    return matching.map((subscriptionId) => ({
      id: newId(),
      shop_id: event.shopId,
      subscription_id: subscriptionId,
      event_id: event.id,
      topic: event.type,
      status: 'pending' as const,
      payload,
      due_at: now,
      next_attempt_at: now,
      created_at: now,
      updated_at: now,
    }));
  });
  let created = 0;
  for (let i = 0; i < rows.length; i += INSERT_CHUNK) {
    const result = await trx
      .insertInto('webhook_deliveries')
      .values(rows.slice(i, i + INSERT_CHUNK))
      .onConflict((oc) => oc.columns(['event_id', 'subscription_id']).doNothing())
      .executeTakeFirst();
    created += Number(result.numInsertedOrUpdatedRows ?? 0);
  }
  if (created > 0) afterCommit(trx, announceDeliveriesDue);
  return created;
}

/**
 * Cancels what a subscription still had to send, in the caller's transaction (the subscription's
 * delete): pending and retrying deliveries become `cancelled`, one being sent too (its worker's
 * lease is revoked, so the outcome it reports no longer changes the record), and waiting replays
 * are dropped. The records themselves stay.
 */
export async function cancelSubscriptionDeliveries(trx: Trx, shopId: string, subscriptionId: string, now: Date): Promise<number> {
  const result = await trx
    .updateTable('webhook_deliveries')
    .set(cancelled(now))
    .where('shop_id', '=', shopId)
    .where('subscription_id', '=', subscriptionId)
    .where((eb) => eb.or([eb('status', 'in', ['pending', 'retrying', 'sending']), eb('due_at', 'is not', null)]))
    .executeTakeFirst();
  return Number(result.numUpdatedRows);
}

/** What cancelling a delivery sets: what it still had to send ends, a worker's lease is revoked, a waiting replay dropped. */
function cancelled(now: Date) {
  return {
    // status_before_send is set only while sending: a replay in flight keeps its delivery's outcome.
    status: sql<WebhookDeliveryStatus>`case when coalesce(status_before_send, status) in ('pending', 'retrying', 'sending') then 'cancelled' else coalesce(status_before_send, status) end`,
    due_at: null,
    next_attempt_at: null,
    lease_token: null,
    replay_requested: false,
    status_before_send: null,
    updated_at: now,
  };
}

/**
 * Purges the payloads of the shop's deliveries that carry any of `marks` in any letter case (texts
 * as JSON.stringify writes them: a person's e-mail, say), in the caller's transaction (a customer's erasure): the
 * payload becomes empty and what was still to send is cancelled, as is the receivers' answers' text.
 * The records stay. The ids purged.
 */
export async function purgeDeliveriesCarrying(trx: Trx, shopId: string, marks: readonly string[], now: Date): Promise<string[]> {
  if (marks.length === 0) return [];
  const purged = await trx
    .updateTable('webhook_deliveries')
    .set({ ...cancelled(now), payload: '' })
    .where('shop_id', '=', shopId)
    .where(containsAny(sql.ref('payload'), marks))
    .returning('id')
    .execute();
  const ids = purged.map((row) => row.id);
  if (ids.length) await trx.updateTable('webhook_delivery_attempts').set({ response_body: null }).where('delivery_id', 'in', ids).execute();
  return ids;
}

/**
 * Makes what a probing or disabled subscription held due at once, in the caller's transaction
 * (its re-enable or URL update): its pending deliveries are due already, and those waiting for a
 * retry are pulled forward.
 */
export async function resumeSubscriptionDeliveries(trx: Trx, shopId: string, subscriptionId: string, now: Date): Promise<void> {
  await trx
    .updateTable('webhook_deliveries')
    .set({ due_at: now, updated_at: now })
    .where('shop_id', '=', shopId)
    .where('subscription_id', '=', subscriptionId)
    .where('status', '=', 'retrying')
    .where('due_at', '>', now)
    .execute();
  afterCommit(trx, announceDeliveriesDue);
}

// --- Wake-ups -------------------------------------------------------------------------------

const dueSignals = new EventEmitter();

function announceDeliveriesDue(): void {
  dueSignals.emit('due');
}

/**
 * Calls `listener` when this process commits deliveries that are due now (fan-out, replay), so
 * the worker sends them at once instead of at its next poll. Returns the unsubscribe.
 */
export function onDeliveriesDue(listener: () => void): () => void {
  dueSignals.on('due', listener);
  return () => dueSignals.off('due', listener);
}

// --- Queries --------------------------------------------------------------------------------

const optionalQueryString = z.preprocess((v) => (v === '' ? undefined : v), z.string().trim().max(200).optional());

export const deliveryFilterSchema = z.object({
  subscriptionId: optionalQueryString.refine((v) => v === undefined || isId(v), 'not a webhook subscription id'),
  status: z.preprocess((v) => (v === '' ? undefined : v), z.enum(DELIVERY_STATUSES).optional()),
  /** A topic, or `group/*` for every topic of a group. */
  topic: optionalQueryString,
});
export type DeliveryFilter = z.output<typeof deliveryFilterSchema>;

const pageNumber = (max: number, fallback: number) =>
  z.preprocess(
    (value) => (value === undefined || value === '' ? fallback : typeof value === 'string' && /^\s*\d{1,10}\s*$/.test(value) ? Number(value) : value),
    z.number().int().min(1).max(max),
  );

/**
 * How deep numbered pages go. An offset costs what it skips (an index walk of every key before the
 * page), so past the first 10,000 deliveries a client follows `nextCursor` with `after`, a keyset
 * that costs the same at any depth; Elasticsearch's result window and Shopify's `page_info` draw
 * the same line.
 */
export const MAX_DELIVERY_OFFSET = 10_000;

/**
 * The REST list's query: the filters, plus `page` (default 1) and `pageSize` (default 50, at most
 * 250), or `after` (a `nextCursor`) in place of `page`.
 */
export const deliveryListQuerySchema = deliveryFilterSchema
  .extend({
    page: pageNumber(1_000_000_000, 1),
    pageSize: pageNumber(MAX_PAGE_SIZE, 50),
    after: optionalQueryString,
  })
  .superRefine(({ page, pageSize, after }, ctx) => {
    if (after !== undefined && page !== 1) {
      ctx.addIssue({ code: 'custom', path: ['page'], message: 'page and after exclude each other: after continues where a page ended' });
    } else if (page * pageSize > MAX_DELIVERY_OFFSET) {
      ctx.addIssue({
        code: 'custom',
        path: ['page'],
        message: `numbered pages cover the newest ${MAX_DELIVERY_OFFSET} deliveries; go further with after=<nextCursor>`,
      });
    }
  });

/**
 * The keys (id, created_at) of the deliveries a filter selects, past a cursor when given, newest
 * first: one index range whatever the filter (a topic group such as `points/*` has its own
 * index, on the topic's first segment, `topic_group`).
 */
function deliveryKeys(db: Queryable, shopId: string, filter: DeliveryFilter, after?: string | null) {
  let query = db.selectFrom('webhook_deliveries').select(['id', 'created_at']).where('shop_id', '=', shopId);
  if (filter.subscriptionId) query = query.where('subscription_id', '=', filter.subscriptionId);
  if (filter.status) query = query.where('status', '=', filter.status);
  if (filter.topic?.endsWith('/*')) {
    const group = filter.topic.slice(0, -2);
    // Topics are `group/name`: a pattern of a longer prefix matches none.
    query = group.includes('/') ? query.where(sql<boolean>`false`) : query.where('topic_group', '=', group);
  } else if (filter.topic) {
    query = query.where('topic', '=', filter.topic);
  }
  if (after) query = query.where(beforeTimeCursor(after));
  return query.orderBy('created_at', 'desc').orderBy('id', 'desc');
}

/** The full rows of a page of keys, in the keys' order. */
function deliveriesOfKeys(db: Queryable, keys: ReturnType<typeof deliveryKeys>) {
  return db
    .selectFrom(keys.as('p'))
    .innerJoin('webhook_deliveries as d', 'd.id', 'p.id')
    .selectAll('d')
    .orderBy('p.created_at', 'desc')
    .orderBy('p.id', 'desc')
    .execute();
}

/**
 * A page of the shop's deliveries, newest first (those of deleted subscriptions included): past a
 * cursor, after skipping `offset` keys, one more than asked to learn whether more follow.
 */
async function deliveriesPage(db: Queryable, shopId: string, filter: DeliveryFilter, page: { after?: string | null | undefined; offset?: number; first: number }): Promise<Page<WebhookDelivery>> {
  const keys = deliveryKeys(db, shopId, filter, page.after).offset(page.offset ?? 0).limit(page.first + 1);
  const rows = await deliveriesOfKeys(db, keys);
  const items = rows.slice(0, page.first).map((row) => ({ node: toWebhookDelivery(row), cursor: encodeTimeCursor(row) }));
  return { items, hasNextPage: rows.length > items.length };
}

/** The REST list: a numbered page, or the page after a cursor, and the cursor to go on from. */
export async function listDeliveries(db: Queryable, shopId: string, input: unknown): Promise<{ deliveries: WebhookDelivery[]; nextCursor: string | null }> {
  const { page, pageSize, after, ...filter } = parseInput(deliveryListQuerySchema, input ?? {});
  const found = await deliveriesPage(db, shopId, filter, { after, offset: (page - 1) * pageSize, first: pageSize });
  return { deliveries: found.items.map((item) => item.node), nextCursor: nextCursor(found) };
}

/** The same list as keyset pages, for GraphQL connections. */
export async function listDeliveriesPage(db: Queryable, shopId: string, filterInput: unknown, args: PageArgs): Promise<Page<WebhookDelivery>> {
  return deliveriesPage(db, shopId, parseInput(deliveryFilterSchema, filterInput ?? {}), args);
}

function deliveryId(id: string): string {
  if (!isId(id)) throw new ValidationError('id: not a webhook delivery id', [{ path: 'id', message: 'malformed id' }]);
  return id;
}

function deliveryNotFound(id: string) {
  return new NotFoundError('delivery_not_found', `this shop has no webhook delivery ${id}`, ['id']);
}

export async function getDelivery(db: Queryable, shopId: string, id: string): Promise<WebhookDeliveryDetail> {
  deliveryId(id);
  const row = await db.selectFrom('webhook_deliveries').selectAll().where('id', '=', id).where('shop_id', '=', shopId).executeTakeFirst();
  if (!row) throw deliveryNotFound(id);
  const attempts = await db
    .selectFrom('webhook_delivery_attempts')
    .selectAll()
    .where('delivery_id', '=', id)
    .orderBy('attempted_at')
    .orderBy('id')
    .execute();
  return { ...toWebhookDelivery(row), attempts: attempts.map(toAttempt), payload: row.payload };
}

/** The attempts of many deliveries of the shop (a list's `attempts`), oldest first, in the order of `ids`. */
export async function listAttemptsOfDeliveries(db: Queryable, shopId: string, ids: readonly string[]): Promise<WebhookDeliveryAttempt[][]> {
  const rows = await db
    .selectFrom('webhook_delivery_attempts as a')
    .innerJoin('webhook_deliveries as d', 'd.id', 'a.delivery_id')
    .selectAll('a')
    .where('d.shop_id', '=', shopId)
    .where('a.delivery_id', 'in', [...ids])
    .orderBy('a.attempted_at')
    .orderBy('a.id')
    .execute();
  const byDelivery = new Map<string, WebhookDeliveryAttempt[]>(ids.map((id) => [id, []]));
  for (const row of rows) byDelivery.get(row.delivery_id)!.push(toAttempt(row));
  return ids.map((id) => byDelivery.get(id)!);
}

/** The payloads of many deliveries of the shop (a list's `payload`), in the order of `ids`; an error for one the shop has not. */
export async function payloadsOfDeliveries(db: Queryable, shopId: string, ids: readonly string[]): Promise<Array<string | NotFoundError>> {
  const rows = await db.selectFrom('webhook_deliveries').select(['id', 'payload']).where('shop_id', '=', shopId).where('id', 'in', [...ids]).execute();
  const payloads = new Map(rows.map((row) => [row.id, row.payload]));
  return ids.map((id) => payloads.get(id) ?? deliveryNotFound(id));
}

/**
 * Asks for a manual attempt (202: the worker makes it at once): the same `webhook-id`, a fresh
 * timestamp, the subscription's current URL and secrets. It does not touch the retry schedule;
 * a delivery whose subscription was deleted cannot be replayed (`422 subscription_deleted`).
 */
export async function requestReplay(db: DB, shopId: string, id: string, now = new Date(), actor?: Actor): Promise<WebhookDelivery> {
  deliveryId(id);
  return inTransaction(db, async (trx) => {
    const row = await trx
      .selectFrom('webhook_deliveries')
      .select(['id', 'subscription_id', 'status', sql<boolean>`payload = ''`.as('purged')])
      .where('id', '=', id)
      .where('shop_id', '=', shopId)
      .forUpdate()
      .executeTakeFirst();
    if (!row) throw deliveryNotFound(id);
    const subscription = await trx.selectFrom('webhook_subscriptions').select('status').where('id', '=', row.subscription_id).executeTakeFirst();
    if (!subscription) {
      throw new RuleViolationError('subscription_deleted', 'the subscription of this delivery was deleted; there is nowhere to send it', ['id']);
    }
    if (subscription.status === 'disabled') {
      throw new RuleViolationError('subscription_disabled', 'the subscription of this delivery is disabled; update its callback URL or re-enable it first', ['id']);
    }
    if (row.purged) throw new RuleViolationError('delivery_payload_purged', 'this delivery\'s payload was purged (the customer it carried was erased); there is nothing to send', ['id']);
    const updated = await trx
      .updateTable('webhook_deliveries')
      // While an attempt is in flight, due_at is its lease: the worker finishing it sees the request.
      .set({ replay_requested: true, due_at: row.status === 'sending' ? sql`due_at` : now, updated_at: now })
      .where('id', '=', id)
      .returningAll()
      .executeTakeFirstOrThrow();
    await recordAudit(trx, shopId, actor, { kind: 'webhookDelivery.replay', subject: { type: 'webhookDelivery', id }, before: { status: row.status } }, now);
    afterCommit(trx, announceDeliveriesDue);
    return toWebhookDelivery(updated);
  });
}
