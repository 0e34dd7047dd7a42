import { EventEmitter } from 'node:events';
import { sql } from 'kysely';
import type { DB } from '../../db/database.js';
import { purgeInBatches, type PurgeOptions } from '../../db/purge.js';
import { afterCommit, type Queryable, type Trx } from '../../db/transaction.js';
import { randomString } from './ids.js';
import { holdsAny, redactedJsonb, type Redactions } from './redaction.js';

/** The webhook topics, in catalog order (DESIGN.md "Webhooks"). */
export const EVENT_TOPICS = {
  'customers/created': 'A customer was created (GraphQL upsert, import or referral sign-up).',
  'customers/updated': 'A customer\'s e-mail or birthday changed.',
  'customers/erased': 'A customer was erased on request (a data-protection erasure): their e-mail, shop customer id and birthday are gone; the id stays as a tombstone whose ledger and orders still add up.',
  'customers/data_requested': 'Shopify asked, by its customers/data_request webhook, for a customer\'s data: the export is kept with the compliance request (GET /complianceRequests/{id}) for the shop to send them.',
  'points/added': 'Points were added to a customer\'s balance.',
  'points/subtracted': 'Points were subtracted from a customer\'s balance.',
  'points/updated': 'A customer\'s balance was set to an absolute value.',
  'points/earned': 'An earning rule credited points to the balance: an order, a sign-up, a birthday or a custom action.',
  'points/pending': 'An order earned points that wait for the shop\'s pendingDays before they can be spent.',
  'points/available': 'Pending points of an order became available: they were added to the balance.',
  'points/clawed_back': 'A refund or cancellation took back points an order had earned (pending ones first, then the balance).',
  'points/expiring': 'Points of a customer will expire soon (the shop\'s expiry warningDays before): once per customer per expiry date.',
  'points/expired': 'Points reached their expiry and left the balance (an expire_points ledger entry).',
  'points/refunded': 'A discount code\'s points came back to the balance (a refund_redemption ledger entry): the code was cancelled, expired or its order refunded, where the shop returns them.',
  'tiers/changed': 'A customer\'s VIP tier changed: up at once when their metric reached a threshold, at the daily evaluation (up or down), or by staff\'s override and its end.',
  'orders/created': 'An order was recorded (PUT /orders, GraphQL orderUpsert, the Shopify connector or the orders import).',
  'orders/updated': 'An order changed state: paid, refunded in part or in full, or cancelled.',
  'redemptions/created': 'A customer redeemed points for a discount code.',
  'redemptions/used': 'An order used a discount code: its discount was applied at a checkout.',
  'redemptions/expiring': 'A discount code will expire soon (the shop\'s codeWarningDays before): once per code.',
  'redemptions/expired': 'A discount code reached its expiry unused.',
  'redemptions/cancelled': 'The shop cancelled an unused discount code.',
  'referrals/code_created': 'A customer\'s referral code was generated.',
  'referrals/referee_created': 'A customer signed up with a referral code.',
  'webhook_subscriptions/disabled':
    'A webhook subscription was disabled after failing for days without a success; update its callback URL or re-enable it.',
} as const;

export type EventTopic = keyof typeof EVENT_TOPICS;

/** Whether a subscription's topic (a catalog topic or `<group>/*`) covers an event's type. */
export function topicMatches(pattern: string, topic: string): boolean {
  return pattern.endsWith('/*') ? topic.startsWith(pattern.slice(0, -1)) : pattern === topic;
}

const EVENT_ID_ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';

export function newEventId(): string {
  return `evt_${randomString(24, EVENT_ID_ALPHABET)}`;
}

/**
 * Writes an event to the outbox inside the caller's transaction, so it exists exactly when the
 * change it describes does. `data` is the resource after the change.
 */
export async function recordEvent(trx: Trx, shopId: string, type: EventTopic, data: unknown): Promise<string> {
  const [id] = await recordEvents(trx, shopId, [{ type, data }]);
  return id!;
}

/** Several events of one shop in one statement, in order: for bulk writers such as the customers import. */
export async function recordEvents(
  trx: Trx,
  shopId: string,
  events: ReadonlyArray<{ type: EventTopic; data: unknown }>,
): Promise<string[]> {
  return recordShopEvents(
    trx,
    events.map((e) => ({ shopId, ...e })),
  );
}

export type ShopEvent = { shopId: string; type: EventTopic; data: unknown };

/** Events of any shops in one statement, in order: for writers that serve several shops at once (order batches). */
export async function recordShopEvents(trx: Trx, events: readonly ShopEvent[]): Promise<string[]> {
  if (events.length === 0) return [];
  const ids = events.map(() => newEventId());
  // Columns as arrays: one short statement whatever the number of events (a VALUES list grows with
  // it, and costs more to parse than to insert). The data go as one JSON array, not a jsonb[]: an
  // array literal escapes every quote of every document, on both sides of the wire.
  await sql`
    insert into outbox_events (id, shop_id, type, data)
    select id, shop_id, type, data from rows from (unnest(${ids}::text[]), unnest(${events.map((e) => e.shopId)}::text[]),
      unnest(${events.map((e) => e.type)}::text[]), jsonb_array_elements(${JSON.stringify(events.map((e) => e.data))}::jsonb))
      with ordinality as input(id, shop_id, type, data, n)
    order by n`.execute(trx);
  announceOutboxWrite(trx);
  return ids;
}

const outboxCommits = new EventEmitter();

/** Call after writing outbox events through `db`: wakes the relay once they are committed. */
export function announceOutboxWrite(db: Queryable): void {
  afterCommit(db, () => outboxCommits.emit('commit'));
}

/**
 * Calls `listener` whenever a transaction of this process that wrote outbox events commits, so
 * the relay can pick them up at once instead of at its next poll. Returns the unsubscribe.
 */
export function onOutboxCommit(listener: () => void): () => void {
  outboxCommits.on('commit', listener);
  return () => outboxCommits.off('commit', listener);
}

/**
 * Deletes relayed events written before `before` (OUTBOX_RETENTION_HOURS): once relayed, an event
 * has done its work (each delivery keeps its own payload). Never an unrelayed one. Walks the
 * primary key (seq) in bounded batches (`purgeInBatches`), so the outbox needs no index for it and
 * its writers no extra index entry: seq follows write order, and the walk stops at the first batch
 * that reaches an event written after `before` (one written late by a long transaction goes at the
 * next run). Resolves to the number deleted.
 */
export async function purgeRelayedOutboxEvents(db: DB, before: Date, options: PurgeOptions = {}): Promise<number> {
  return purgeInBatches<number>(options, async (position, limit) => {
    // Relayed rows are never written again, so deleting them cannot meet the relay's locks.
    const { rows } = await sql<{ read: number; deleted: number; last: number | null; reached: boolean | null }>`
      with batch as (
        select seq, created_at, relayed_at from outbox_events
        ${position === null ? sql`` : sql`where seq > ${position}`}
        order by seq
        limit ${limit}
      ),
      deleted as (
        delete from outbox_events
        where seq = any(array(select seq from batch where relayed_at is not null and created_at < ${before}))
        returning 1
      )
      select (select count(*) from batch)::int as read, (select count(*) from deleted)::int as deleted,
        (select max(seq) from batch) as last, (select bool_or(created_at >= ${before}) from batch) as reached`.execute(db);
    const row = rows[0]!;
    return { deleted: row.deleted, next: row.read < limit || row.reached ? null : row.last };
  });
}

/**
 * Replaces a person's values in the shop's events still in the outbox (a customer's erasure, in its
 * transaction): an event not yet relayed then goes out without them, a relayed one keeps them no longer.
 */
export async function redactEvents(trx: Trx, shopId: string, redactions: Redactions): Promise<void> {
  if (redactions.length === 0) return;
  await trx
    .updateTable('outbox_events')
    .set({ data: redactedJsonb(sql.ref('data'), redactions) })
    .where('shop_id', '=', shopId)
    .where(holdsAny(sql.ref('data'), redactions))
    .execute();
}
