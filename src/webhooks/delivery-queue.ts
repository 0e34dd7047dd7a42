import { sql } from 'kysely';
import type { DB } from '../db/database.js';
import { purgeInBatches, type PurgeOptions, type PurgeStep } from '../db/purge.js';
import type { WebhookAttemptTrigger, WebhookDeliveryStatus, WebhookSubscriptionRow } from '../db/schema.js';
import { inTransaction, type Queryable } from '../db/transaction.js';
import { newId, recordEvent } from '../domain/kernel/index.js';
import { toWebhookSubscription } from '../domain/webhooks/index.js';

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

/**
 * Claims up to `limit` due deliveries, fairly (DESIGN.md "Tenant isolation"): round-robin across
 * subscriptions (every endpoint's oldest due row first, then every endpoint's second, …) and at
 * most `maxInFlight` attempts in flight per subscription (1 while it is probing, none while it is
 * disabled), counted in the database so the cap holds across workers and processes. One endpoint's
 * backlog or time-outs therefore never take the slots another endpoint needs.
 */
export async function claimDueDeliveries(
  db: DB,
  options: { limit: number; now: Date; leaseMs: number; token: string; maxInFlight: number },
): Promise<ClaimedDelivery[]> {
  const { limit, now, leaseMs, token, maxInFlight } = options;
  const leaseEnd = new Date(now.getTime() + leaseMs);
  const { rows } = await inTransaction(db, async (trx) => {
    // First lock the subscriptions with something due (a loose index scan: one probe per such
    // subscription, not one row per due delivery). A subscription another worker is claiming for
    // is skipped, and its count below is read only once we hold the lock, in the next statement's
    // snapshot, so two workers can never both see the same free room.
    const { rows: subscriptions } = await sql<{ id: string; cap: number }>`
      with recursive due(id) as (
        (select subscription_id from webhook_deliveries where due_at <= ${now} order by subscription_id limit 1)
        union all
        select (select d.subscription_id from webhook_deliveries d
                where d.subscription_id > due.id and d.due_at <= ${now} order by d.subscription_id limit 1)
        from due where due.id is not null
      )
      select s.id, case when s.status = 'probing' then 1 else ${maxInFlight}::int end as cap
      from webhook_subscriptions s join due on due.id = s.id
      where s.status <> 'disabled'
      for no key update of s skip locked`.execute(trx);
    if (subscriptions.length === 0) return { rows: [] };
    // In UPDATE … SET every right-hand side sees the row as it was, so `status` below is the old one.
    return sql<{
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
        select c.id from jsonb_to_recordset(${JSON.stringify(subscriptions)}::jsonb) as s(id text, cap integer)
        cross join lateral (
          select x.id, x.due_at, row_number() over (order by x.due_at) as turn from (
            select id, due_at from webhook_deliveries
            where subscription_id = s.id and due_at <= ${now}
            order by due_at
            limit least(${limit}::int, greatest(0, s.cap - (
              -- attempts in flight: claimed with a lease that has not run out
              select count(*) from webhook_deliveries f where f.subscription_id = s.id and f.status = 'sending' and f.due_at > ${now})))
            for update skip locked
          ) x
        ) c
        order by c.turn, c.due_at
        limit ${limit}
      ) due
      where d.id = due.id
      returning d.id, d.shop_id, d.subscription_id, d.event_id, d.topic, d.payload, d.current_trigger,
        d.scheduled_attempts, d.next_attempt_at, d.status_before_send`.execute(trx);
  });
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

export type FinishedAttempt = { claimed: ClaimedDelivery; attempt: AttemptRecord; succeeded: boolean; state: DeliveryState; now: Date };

/** When an endpoint goes to probing, and when it is disabled (DESIGN.md "Tenant isolation", docs/webhooks.md). */
export type HealthRules = { probeAfterFailures: number; disableAfterMs: number };

// PostgreSQL text cannot hold NUL; a receiver's body or an error message might.
const storable = (text: string | null) => (text === null ? null : text.replaceAll('\u0000', '\uFFFD'));

/** Per subscription, what a batch of attempts says about its health, in the order they were made. */
function healthOf(finished: readonly FinishedAttempt[]) {
  const bySubscription = new Map<string, { id: string; failures: number; reset: boolean; first_failure_at: string | null }>();
  for (const f of [...finished].sort((a, b) => a.attempt.attemptedAt.getTime() - b.attempt.attemptedAt.getTime())) {
    const id = f.claimed.subscriptionId;
    const h = bySubscription.get(id) ?? { id, failures: 0, reset: false, first_failure_at: null };
    if (f.succeeded) Object.assign(h, { failures: 0, reset: true, first_failure_at: null });
    else {
      h.failures++;
      h.first_failure_at ??= f.attempt.attemptedAt.toISOString();
    }
    bySubscription.set(id, h);
  }
  return [...bySubscription.values()];
}

/**
 * Records attempts and, for each whose lease still holds, the delivery's new state: one statement
 * for the whole batch (the worker groups the attempts that finish together). A replay asked for
 * while an attempt was in flight makes its delivery due again at once.
 * The same statement keeps each endpoint's health: a success resets it; `probeAfterFailures`
 * consecutive failures put it on probing; failing without a success for `disableAfterMs` disables
 * it, announced by a `webhook_subscriptions/disabled` event in the same transaction.
 */
export async function finishAttempts(db: DB, finished: readonly FinishedAttempt[], rules: HealthRules): Promise<void> {
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
  const now = new Date(Math.max(...finished.map((f) => f.now.getTime())));
  const disableBefore = new Date(now.getTime() - rules.disableAfterMs);
  const days = +(rules.disableAfterMs / 86_400_000).toFixed(3);
  const record = (q: Queryable) =>
    sql<WebhookSubscriptionRow>`
      with input as (
        select * from jsonb_to_recordset(${JSON.stringify(rows)}::jsonb) as x(
          id text, token text, attempt_id text, attempted_at timestamptz, trigger text, url text,
          response_status integer, duration_ms integer, error text, response_body text,
          status text, next_attempt_at timestamptz, scheduled_attempts integer, now timestamptz)
      ),
      attempts as (
        insert into webhook_delivery_attempts (id, delivery_id, attempted_at, trigger, url, response_status, duration_ms, error, response_body)
        select attempt_id, id, attempted_at, trigger, url, response_status, duration_ms, error, response_body from input
      ),
      health as (
        select * from jsonb_to_recordset(${JSON.stringify(healthOf(finished))}::jsonb) as h(
          id text, failures integer, reset boolean, first_failure_at timestamptz)
      ),
      -- Only endpoints whose health changes are written (a healthy endpoint's success changes
      -- nothing), locked in id order so two workers' batches cannot deadlock on them.
      locked as (
        select s.id, s.status, s.consecutive_failures, s.failing_since
        from webhook_subscriptions s join health h on h.id = s.id
        where h.failures > 0 or s.consecutive_failures > 0 or s.status = 'probing'
        order by s.id
        for no key update of s
      ),
      deliveries as (
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
        -- The endpoints' rows are locked before any delivery's (the condition runs "locked" first),
        -- the order a subscription's delete or re-enable takes too, so they cannot deadlock.
        where d.id = x.id and d.lease_token = x.token and (select count(*) from locked) >= 0
      ),
      next as (
        select l.id, l.status as old_status,
          case when h.reset then h.failures else l.consecutive_failures + h.failures end as failures,
          case when h.failures = 0 then null when h.reset then h.first_failure_at else coalesce(l.failing_since, h.first_failure_at) end as since
        from locked l join health h on h.id = l.id
      ),
      changed as (
        select n.*, case
            when n.old_status = 'disabled' then 'disabled'
            when n.since <= ${disableBefore} then 'disabled'
            when n.failures >= ${rules.probeAfterFailures}::int then 'probing'
            else 'enabled' end as status
        from next n
      ),
      updated as (
        update webhook_subscriptions s set
          consecutive_failures = c.failures,
          failing_since = c.since,
          status = c.status,
          disabled_reason = case
            when c.old_status = 'disabled' then s.disabled_reason
            when c.status = 'disabled' then
              'no successful attempt since ' || to_char(c.since at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"') ||
              ' (' || c.failures || ' failed attempts in a row, ' || ${days}::text || ' days without a success); update the callback URL or re-enable it'
            end,
          updated_at = case when c.status <> c.old_status then ${now} else s.updated_at end
        from changed c
        where s.id = c.id
        returning s.*, c.old_status
      )
      select * from updated where status = 'disabled' and old_status <> 'disabled'`.execute(q);
  // A success never disables: only a batch with failures needs the transaction an event takes.
  if (finished.every((f) => f.succeeded)) {
    await record(db);
    return;
  }
  await inTransaction(db, async (trx) => {
    const { rows: disabled } = await record(trx);
    for (const row of disabled) await recordEvent(trx, row.shop_id, 'webhook_subscriptions/disabled', toWebhookSubscription(row));
  });
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

/** Gives unsent claims back (a worker stopping): due again at `dueAt` (at once), as they were before the claim. */
export async function handBack(db: DB, claims: readonly ClaimedDelivery[], now: Date, dueAt = now): Promise<void> {
  for (const claimed of claims) {
    await db
      .updateTable('webhook_deliveries')
      .set({
        status: claimed.statusBeforeSend,
        replay_requested: sql`replay_requested or ${claimed.trigger === 'manual'}`,
        due_at: dueAt,
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

type DeliveryPosition = { createdAt: Date; id: string };

/**
 * Deletes deliveries that have nothing left to do, with their attempts (the foreign key cascades):
 * those created before `before` (the server's retention), or for a shop with its own
 * webhook_retention_days, created that many days before `now`. Resolves to the number deleted.
 *
 * The main pass walks `webhook_deliveries_purge_idx` (created_at, id of the rows with nothing
 * due) from its start to `before` in bounded batches (`purgeInBatches`): rows still due are not in
 * that index at all, and rows a shop keeps longer, or a worker holds, are passed over once. A shop
 * that keeps deliveries for less than the server gets a pass of its own over its rows between the
 * two ages, on its (shop_id, created_at) index.
 */
export async function purgeDeliveries(db: DB, before: Date, options: PurgeOptions & { now?: Date } = {}): Promise<number> {
  const now = options.now ?? new Date();
  const overrides = (
    await db.selectFrom('shops').select(['id', 'webhook_retention_days']).where('webhook_retention_days', 'is not', null).execute()
  ).map((shop) => ({ shopId: shop.id, cutoff: new Date(now.getTime() - shop.webhook_retention_days! * DAY_MS) }));
  const keptLonger = overrides.filter((o) => o.cutoff < before);
  let total = await purgeInBatches<DeliveryPosition>(options, (position, limit) =>
    deleteDeliveryBatch(db, { cutoff: before, keptLonger, position, limit }),
  );
  for (const shop of overrides.filter((o) => o.cutoff > before)) {
    total += await purgeInBatches<DeliveryPosition>(options, (position, limit) =>
      deleteDeliveryBatch(db, { shopId: shop.shopId, from: before, cutoff: shop.cutoff, keptLonger: [], position, limit }),
    );
  }
  return total;
}

/**
 * One batch: the next `limit` rows with nothing due created before `cutoff` (from `from`, of one
 * shop if `shopId` is given), after `position`; deletes those no shop keeps longer and no worker
 * holds (SKIP LOCKED: a batch never waits for live traffic), and says where it stopped.
 */
async function deleteDeliveryBatch(
  db: DB,
  batch: {
    cutoff: Date;
    keptLonger: ReadonlyArray<{ shopId: string; cutoff: Date }>;
    position: DeliveryPosition | null;
    limit: number;
    shopId?: string;
    from?: Date;
  },
): Promise<PurgeStep<DeliveryPosition>> {
  const { cutoff, keptLonger, position, limit, shopId, from } = batch;
  const { rows } = await sql<{ read: number; deleted: number; created_at: Date | null; id: string | null }>`
    with batch as (
      select ctid, id, shop_id, created_at, status from webhook_deliveries
      where due_at is null and created_at < ${cutoff}
        ${shopId === undefined ? sql`` : sql`and shop_id = ${shopId} and created_at >= ${from}`}
        ${position ? sql`and (created_at, id) > (${position.createdAt}, ${position.id})` : sql``}
      order by created_at, id
      limit ${limit}
    ),
    -- Rows are found again by ctid (a tid scan), never by a join the planner could make a scan of
    -- the whole table; a row changed meanwhile no longer matches its ctid and is left alone.
    doomed as (
      select ctid from webhook_deliveries
      where ctid = any(array(
          select b.ctid from batch b
          where b.status <> 'sending' and not exists (
            select 1 from jsonb_to_recordset(${JSON.stringify(keptLonger)}::jsonb) as k("shopId" text, cutoff timestamptz)
            where k."shopId" = b.shop_id and b.created_at >= k.cutoff)))
        and due_at is null and status <> 'sending'
      for update skip locked
    ),
    deleted as (delete from webhook_deliveries where ctid = any(array(select ctid from doomed)) returning 1)
    select (select count(*) from batch)::int as read, (select count(*) from deleted)::int as deleted, last.created_at, last.id
    from (select 1) one left join (select created_at, id from batch order by created_at desc, id desc limit 1) last on true`.execute(db);
  const row = rows[0]!;
  return {
    deleted: row.deleted,
    next: row.read < limit || row.created_at === null ? null : { createdAt: row.created_at, id: row.id! },
  };
}
