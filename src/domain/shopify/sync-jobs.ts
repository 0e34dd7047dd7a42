import { sql } from 'kysely';
import type { ShopifySyncJobRow } from '../../db/schema.js';
import type { Queryable } from '../../db/transaction.js';
import { MAX_ATTEMPTS, newId, RETRY_DELAYS_MS } from '../kernel/index.js';

/**
 * Everything we tell Shopify is a job in a per-shop queue (DESIGN.md "Shopify, the Admin side"):
 * written in the transaction that decided it (or by the outbox relay), done by whichever worker
 * claims it. A claim is a lease (the job's due time moved past the call), so a worker killed
 * mid-call leaves the job to be claimed again when the lease ends; each kind's handler makes a
 * second try harmless (a code is looked up by its text before it is created). A job that fails
 * is retried with the due-work backoff and, after MAX_ATTEMPTS, kept as failed with Shopify's
 * reason; a throttled call is not the job's failure and costs it no try.
 */

export const SYNC_KINDS = ['code_create', 'code_deactivate', 'webhooks_register', 'collections_reconcile', 'product_collections'] as const;
export type SyncKind = (typeof SYNC_KINDS)[number];
export type SyncJob = ShopifySyncJobRow & { kind: SyncKind };

export type NewSyncJob = { shopId: string; kind: SyncKind; subject: string };

/**
 * Queues jobs in one statement (the outbox relay queues a batch of codes at once); one already
 * waiting for the same shop, kind and subject is due again now, with fresh tries.
 */
export async function enqueueSyncJobs(db: Queryable, jobs: readonly NewSyncJob[], dueAt = new Date()): Promise<void> {
  // One row per key: a statement's ON CONFLICT cannot update the same row twice.
  const unique = [...new Map(jobs.map((j) => [`${j.shopId} ${j.kind} ${j.subject}`, j])).values()];
  if (unique.length === 0) return;
  await db
    .insertInto('shopify_sync_jobs')
    .values(unique.map((j) => ({ id: newId(), shop_id: j.shopId, kind: j.kind, subject: j.subject, due_at: dueAt })))
    .onConflict((oc) => oc.columns(['shop_id', 'kind', 'subject']).doUpdateSet({ due_at: dueAt, attempts: 0, failed_at: null, last_error: null }))
    .execute();
}

/** Queues a job unless one is waiting for the same shop, kind and subject already (that one keeps its due time and tries). */
export async function ensureSyncJob(db: Queryable, shopId: string, kind: SyncKind, subject: string, dueAt = new Date()): Promise<void> {
  await db
    .insertInto('shopify_sync_jobs')
    .values({ id: newId(), shop_id: shopId, kind, subject, due_at: dueAt })
    .onConflict((oc) => oc.columns(['shop_id', 'kind', 'subject']).doNothing())
    .execute();
}

/**
 * Shops with jobs due, the longest waiting first, leaving out `busy` (shops this worker is
 * serving already, or whose bucket is empty): one lane per shop, so no shop waits behind another's.
 */
export async function shopsWithDueJobs(db: Queryable, now: Date, busy: readonly string[], limit: number): Promise<string[]> {
  let query = db
    .selectFrom('shopify_sync_jobs')
    .select(['shop_id', (eb) => eb.fn.min('due_at').as('first_due')])
    .where('failed_at', 'is', null)
    .where('due_at', '<=', now)
    .groupBy('shop_id');
  if (busy.length) query = query.where('shop_id', 'not in', busy);
  const rows = await query.orderBy('first_due').limit(limit).execute();
  return rows.map((r) => r.shop_id);
}

/** Leases up to `limit` of the shop's due jobs for `leaseMs` (longer than the worker may take over them), oldest first; each lease counts as a try. */
export async function claimSyncJobs(db: Queryable, shopId: string, now: Date, limit: number, leaseMs: number): Promise<SyncJob[]> {
  const { rows } = await sql<SyncJob>`
    update shopify_sync_jobs set due_at = ${new Date(now.getTime() + leaseMs)}, attempts = attempts + 1
    where id = any(array(
      select id from shopify_sync_jobs
      where shop_id = ${shopId} and failed_at is null and due_at <= ${now}
      order by due_at limit ${limit} for update skip locked))
    returning *`.execute(db);
  return rows.sort((a, b) => a.due_at.getTime() - b.due_at.getTime() || a.id.localeCompare(b.id));
}

/** Done: the job goes, unless it was queued again while it ran (its lease was replaced): what it read may be older than that. */
export async function finishSyncJob(db: Queryable, job: SyncJob): Promise<void> {
  await db.deleteFrom('shopify_sync_jobs').where('id', '=', job.id).where('due_at', '=', job.due_at).execute();
}

/** Done for now: a job that recurs (the collections' reconcile) is due again at `dueAt`, with fresh tries. */
export async function rescheduleSyncJob(db: Queryable, job: SyncJob, dueAt: Date): Promise<void> {
  await db.updateTable('shopify_sync_jobs').set({ due_at: dueAt, attempts: 0, failed_at: null, last_error: null }).where('id', '=', job.id).execute();
}

/** Puts a job back, due at `dueAt`, without counting the try (Shopify throttled the call). */
export async function returnSyncJob(db: Queryable, job: SyncJob, dueAt: Date): Promise<void> {
  await db.updateTable('shopify_sync_jobs').set({ due_at: dueAt, attempts: sql`greatest(attempts - 1, 0)` }).where('id', '=', job.id).execute();
}

/**
 * A try failed: the job is due again after its backoff or, out of tries or `refused` (Shopify
 * answered that its input is wrong, which another try will not change), kept as failed. Returns
 * whether it failed for good.
 */
export async function failSyncJob(db: Queryable, job: SyncJob, reason: string, now: Date, refused = false): Promise<boolean> {
  const final = refused || job.attempts >= MAX_ATTEMPTS;
  const delay = RETRY_DELAYS_MS[Math.min(job.attempts, RETRY_DELAYS_MS.length) - 1] ?? RETRY_DELAYS_MS[0];
  await db
    .updateTable('shopify_sync_jobs')
    .set(final ? { failed_at: now, last_error: reason.slice(0, 1000) } : { due_at: new Date(now.getTime() + delay), last_error: reason.slice(0, 1000) })
    .where('id', '=', job.id)
    .execute();
  return final;
}

/** Jobs waiting for a retry and jobs failed for good, for /metrics. */
export async function syncJobCounts(db: Queryable): Promise<{ waiting: number; failed: number }> {
  const row = await db
    .selectFrom('shopify_sync_jobs')
    .select([sql<string>`count(*) filter (where failed_at is null)`.as('waiting'), sql<string>`count(*) filter (where failed_at is not null)`.as('failed')])
    .executeTakeFirstOrThrow();
  return { waiting: Number(row.waiting), failed: Number(row.failed) };
}
