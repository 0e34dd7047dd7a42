import { EventEmitter } from 'node:events';
import { afterCommit, type Queryable, type Trx } from '../db/transaction.js';
import { randomString } from './ids.js';

/** The webhook topics, in catalog order (DESIGN.md "Webhooks"). */
export const EVENT_TOPICS = {
  'customers/created': 'A customer was created (GraphQL upsert, import or referral sign-up).',
  'customers/updated': 'A customer\'s e-mail or birthday changed.',
  'points/added': 'Points were added to a customer\'s balance.',
  'points/subtracted': 'Points were subtracted from a customer\'s balance.',
  'points/updated': 'A customer\'s balance was set to an absolute value.',
  'redemptions/created': 'A customer redeemed points for a discount code.',
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

/** Several events in one statement, in order: for bulk writers such as the customers import. */
export async function recordEvents(
  trx: Trx,
  shopId: string,
  events: ReadonlyArray<{ type: EventTopic; data: unknown }>,
): Promise<string[]> {
  if (events.length === 0) return [];
  const rows = events.map(({ type, data }) => ({
    id: newEventId(),
    shop_id: shopId,
    type,
    data: JSON.stringify(data),
  }));
  await trx.insertInto('outbox_events').values(rows).execute();
  announceOutboxWrite(trx);
  return rows.map((row) => row.id);
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
