import { type RawBuilder, sql } from 'kysely';
import type { DB } from '../db/database.js';
import type { WebhookAttemptTrigger, WebhookDeliveryStatus } from '../db/schema.js';
import { newId } from '../domain/ids.js';

/**
 * The delivery worker's queue in `webhook_deliveries`: a row is due when `due_at` has passed.
 * Claiming sets `due_at` to the lease's end, so a worker that dies mid-send gives its rows back
 * simply by not finishing them; whoever claims them next resends them (same `webhook-id`).
 * Every finish is guarded by the lease token: a worker whose lease ran out, or whose delivery was
 * cancelled meanwhile, records its attempt but no longer decides the delivery's state.
 */

export type ClaimedDelivery = {
  id: string;
  shopId: string;
  subscriptionId: string;
  eventId: string;
  topic: string;
  payload: string;
  trigger: WebhookAttemptTrigger;
  scheduledAttempts: number;
  nextAttemptAt: Date | null;
  statusBeforeSend: WebhookDeliveryStatus;
  leaseToken: string;
};

/** Claims up to `limit` due deliveries (oldest due first), skipping rows other workers hold. */
export async function claimDueDeliveries(db: DB, options: { limit: number; now: Date; leaseMs: number; token: string }): Promise<ClaimedDelivery[]> {
  const { limit, now, leaseMs, token } = options;
  const leaseEnd = new Date(now.getTime() + leaseMs);
  // In UPDATE … SET every right-hand side sees the row as it was, so `status` below is the old one.
  const { rows } = await sql<{
    id: string;
    shop_id: string;
    subscription_id: string;
    event_id: string;
    topic: string;
    payload: string;
    current_trigger: WebhookAttemptTrigger;
    scheduled_attempts: number;
    next_attempt_at: Date | null;
    status_before_send: WebhookDeliveryStatus;
  }>`
    update webhook_deliveries d set
      status = 'sending',
      status_before_send = case when d.status = 'sending' then d.status_before_send else d.status end,
      current_trigger = case when d.replay_requested then 'manual' when d.status = 'sending' then d.current_trigger else 'scheduled' end,
      replay_requested = false,
      lease_token = ${token},
      due_at = ${leaseEnd},
      updated_at = ${now}
    from (
      select id from webhook_deliveries
      where due_at <= ${now}
      order by due_at
      limit ${limit}
      for update skip locked
    ) due
    where d.id = due.id
    returning d.id, d.shop_id, d.subscription_id, d.event_id, d.topic, d.payload, d.current_trigger,
      d.scheduled_attempts, d.next_attempt_at, d.status_before_send`.execute(db);
  return rows.map((r) => ({
    id: r.id,
    shopId: r.shop_id,
    subscriptionId: r.subscription_id,
    eventId: r.event_id,
    topic: r.topic,
    payload: r.payload,
    trigger: r.current_trigger,
    scheduledAttempts: r.scheduled_attempts,
    nextAttemptAt: r.next_attempt_at,
    statusBeforeSend: r.status_before_send,
    leaseToken: token,
  }));
}

export type AttemptRecord = {
  attemptedAt: Date;
  url: string;
  responseStatus: number | null;
  durationMs: number;
  error: string | null;
  responseBody: string | null;
};

/** Where an attempt leaves its delivery: the status and the next scheduled attempt (null: none). */
export type DeliveryState = { status: WebhookDeliveryStatus; nextAttemptAt: Date | null; scheduledAttempts: number };

export type FinishedAttempt = { claimed: ClaimedDelivery; attempt: AttemptRecord; state: DeliveryState; now: Date };

// PostgreSQL text cannot hold NUL; a receiver's body or an error message might.
const storable = (text: string | null) => (text === null ? null : text.replaceAll('\u0000', '\uFFFD'));

/**
 * Records attempts and, for each whose lease still holds, the delivery's new state: one statement
 * for the whole batch (the worker groups the attempts that finish together). A replay asked for
 * while an attempt was in flight makes its delivery due again at once.
 */
export async function finishAttempts(db: DB, finished: readonly FinishedAttempt[]): Promise<void> {
  if (finished.length === 0) return;
  const rows = finished.map(({ claimed, attempt, state, now }) => ({
    id: claimed.id,
    token: claimed.leaseToken,
    attempt_id: newId(),
    attempted_at: attempt.attemptedAt.toISOString(),
    trigger: claimed.trigger,
    url: attempt.url,
    response_status: attempt.responseStatus,
    duration_ms: attempt.durationMs,
    error: storable(attempt.error),
    response_body: storable(attempt.responseBody),
    status: state.status,
    next_attempt_at: state.nextAttemptAt?.toISOString() ?? null,
    scheduled_attempts: state.scheduledAttempts,
    now: now.toISOString(),
  }));
  await sql`
    with input as (
      select * from jsonb_to_recordset(${JSON.stringify(rows)}::jsonb) as x(
        id text, token text, attempt_id text, attempted_at timestamptz, trigger text, url text,
        response_status integer, duration_ms integer, error text, response_body text,
        status text, next_attempt_at timestamptz, scheduled_attempts integer, now timestamptz)
    ),
    attempts as (
      insert into webhook_delivery_attempts (id, delivery_id, attempted_at, trigger, url, response_status, duration_ms, error, response_body)
      select attempt_id, id, attempted_at, trigger, url, response_status, duration_ms, error, response_body from input
    )
    update webhook_deliveries d set
      status = x.status,
      next_attempt_at = x.next_attempt_at,
      scheduled_attempts = x.scheduled_attempts,
      due_at = case when d.replay_requested then x.now else x.next_attempt_at end,
      attempt_count = d.attempt_count + 1,
      last_attempt_at = x.attempted_at,
      last_response_status = x.response_status,
      last_error = x.error,
      lease_token = null,
      status_before_send = null,
      updated_at = x.now
    from input x
    where d.id = x.id and d.lease_token = x.token`.execute(db);
}

/** A delivery whose subscription is gone (deleted while the event was being fanned out): nothing to send. */
export async function cancelClaimed(db: DB, claimed: ClaimedDelivery, now: Date): Promise<void> {
  await db
    .updateTable('webhook_deliveries')
    .set({ status: 'cancelled', due_at: null, next_attempt_at: null, lease_token: null, status_before_send: null, updated_at: now })
    .where('id', '=', claimed.id)
    .where('lease_token', '=', claimed.leaseToken)
    .execute();
}

/** Gives unsent claims back (a worker stopping): due again at once, as they were before the claim. */
export async function handBack(db: DB, claims: readonly ClaimedDelivery[], now: Date): Promise<void> {
  for (const claimed of claims) {
    await db
      .updateTable('webhook_deliveries')
      .set({
        status: claimed.statusBeforeSend,
        replay_requested: sql`replay_requested or ${claimed.trigger === 'manual'}`,
        due_at: now,
        lease_token: null,
        status_before_send: null,
        updated_at: now,
      })
      .where('id', '=', claimed.id)
      .where('lease_token', '=', claimed.leaseToken)
      .execute();
  }
}

const DAY_MS = 24 * 60 * 60 * 1000;

/**
 * Deletes deliveries that have nothing left to do, with their attempts: those created before
 * `before` (the server's retention), or for a shop with its own webhook_retention_days, created
 * that many days before `now`. `batchSize` at a time so no statement holds many locks for long.
 * Resolves to the number deleted.
 */
export async function purgeDeliveries(db: DB, before: Date, batchSize = 500, now = new Date()): Promise<number> {
  // Few shops override it; one pass each keeps every pass on an index range of created_at.
  const overrides = await db
    .selectFrom('shops')
    .select(['id', 'webhook_retention_days'])
    .where('webhook_retention_days', 'is not', null)
    .execute();
  let total = await purgeBatches(
    db,
    sql`created_at < ${before} and shop_id not in (select id from shops where webhook_retention_days is not null)`,
    batchSize,
  );
  for (const shop of overrides) {
    const cutoff = new Date(now.getTime() - shop.webhook_retention_days! * DAY_MS);
    total += await purgeBatches(db, sql`shop_id = ${shop.id} and created_at < ${cutoff}`, batchSize);
  }
  return total;
}

async function purgeBatches(db: DB, condition: RawBuilder<unknown>, batchSize: number): Promise<number> {
  let total = 0;
  for (;;) {
    const { rows } = await sql<{ id: string }>`
      delete from webhook_deliveries where id in (
        select id from webhook_deliveries
        where ${condition} and due_at is null and status <> 'sending'
        limit ${batchSize}
        for update skip locked
      )
      returning id`.execute(db);
    total += rows.length;
    if (rows.length < batchSize) return total;
  }
}
