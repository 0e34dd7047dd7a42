import type { Queryable } from '../db/transaction.js';
import type { WebhookDeliveryRow } from '../db/schema.js';
import { NotFoundError, ValidationError } from './errors.js';
import { isId } from './ids.js';

/**
 * Delivery records, as far as the routes that list and replay them need today. Writing them
 * (outbox fan-out, sending, retries, attempts) belongs to the delivery worker.
 */
export type WebhookDelivery = {
  id: string;
  subscriptionId: string;
  eventId: string;
  topic: string;
  status: string;
  createdAt: Date;
  updatedAt: Date;
};

/** The most a list returns until the delivery worker's issue gives it paging parameters. */
const LIST_LIMIT = 100;

export function toWebhookDelivery(row: WebhookDeliveryRow): WebhookDelivery {
  return {
    id: row.id,
    subscriptionId: row.subscription_id,
    eventId: row.event_id,
    topic: row.topic,
    status: row.status,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
  };
}

/** The shop's most recent deliveries, newest first (those of deleted subscriptions included). */
export async function listDeliveries(db: Queryable, shopId: string): Promise<WebhookDelivery[]> {
  const rows = await db
    .selectFrom('webhook_deliveries')
    .selectAll()
    .where('shop_id', '=', shopId)
    .orderBy('created_at', 'desc')
    .orderBy('id', 'desc')
    .limit(LIST_LIMIT)
    .execute();
  return rows.map(toWebhookDelivery);
}

export async function getDelivery(db: Queryable, shopId: string, id: string): Promise<WebhookDelivery> {
  if (!isId(id)) throw new ValidationError('id: not a webhook delivery id', [{ path: 'id', message: 'malformed id' }]);
  const row = await db
    .selectFrom('webhook_deliveries')
    .selectAll()
    .where('id', '=', id)
    .where('shop_id', '=', shopId)
    .executeTakeFirst();
  if (!row) throw new NotFoundError('delivery_not_found', `this shop has no webhook delivery ${id}`, ['id']);
  return toWebhookDelivery(row);
}
