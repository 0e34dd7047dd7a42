import { setTimeout as sleep } from 'node:timers/promises';
import { sql } from 'kysely';
import type { DB } from '../../db/database.js';
import { purgeInBatches, type PurgeOptions } from '../../db/purge.js';
import { ConflictError, RuleViolationError } from '../kernel/index.js';

/** A key and its stored response live this long (Stripe's 24 hours). */
export const IDEMPOTENCY_TTL_MS = 24 * 60 * 60 * 1000;
/** A claim never completed within this time belongs to a request that died; it may be taken over. */
const STALE_CLAIM_MS = 60_000;

export type StoredResponse = { status: number; body: string };
export type Claim = { kind: 'claimed' } | { kind: 'replay'; response: StoredResponse };

/**
 * Claims `key` for a request with fingerprint `requestHash`. The first request with a key
 * claims it and runs; a later one with the same fingerprint gets the stored response (waiting
 * up to `waitMs` while the first is still running); one with another fingerprint is refused.
 */
export async function claimIdempotencyKey(
  db: DB,
  shopId: string,
  key: string,
  requestHash: string,
  waitMs = 10_000,
): Promise<Claim> {
  const deadline = Date.now() + waitMs;
  for (;;) {
    const inserted = await db
      .insertInto('idempotency_keys')
      .values({ shop_id: shopId, key, request_hash: requestHash, response_status: null, response_body: null, completed_at: null })
      .onConflict((oc) => oc.columns(['shop_id', 'key']).doNothing())
      .returning('key')
      .executeTakeFirst();
    if (inserted) return { kind: 'claimed' };

    const row = await db
      .selectFrom('idempotency_keys')
      .selectAll()
      .where('shop_id', '=', shopId)
      .where('key', '=', key)
      .executeTakeFirst();
    if (!row) continue;
    const age = Date.now() - row.created_at.getTime();
    const expired = age > IDEMPOTENCY_TTL_MS;
    const stale = !row.completed_at && age > STALE_CLAIM_MS;
    if (expired || stale) {
      // Take the key over; the created_at condition makes only one contender win.
      await db
        .deleteFrom('idempotency_keys')
        .where('shop_id', '=', shopId)
        .where('key', '=', key)
        .where('created_at', '=', row.created_at)
        .execute();
      continue;
    }
    if (row.request_hash !== requestHash) {
      throw new RuleViolationError(
        'idempotency_key_reused',
        'this Idempotency-Key was used with a different request; use a new key for a new request',
      );
    }
    if (row.completed_at && row.response_status !== null) {
      return { kind: 'replay', response: { status: row.response_status, body: row.response_body ?? '' } };
    }
    if (Date.now() > deadline) {
      throw new ConflictError('idempotency_key_in_use', 'a request with this Idempotency-Key is still being processed');
    }
    await sleep(20);
  }
}

export async function completeIdempotencyKey(db: DB, shopId: string, key: string, response: StoredResponse): Promise<void> {
  await db
    .updateTable('idempotency_keys')
    .set({ response_status: response.status, response_body: response.body, completed_at: new Date() })
    .where('shop_id', '=', shopId)
    .where('key', '=', key)
    .execute();
}

/** Frees a key whose request failed in a way worth retrying (5xx, 429). */
export async function releaseIdempotencyKey(db: DB, shopId: string, key: string): Promise<void> {
  await db
    .deleteFrom('idempotency_keys')
    .where('shop_id', '=', shopId)
    .where('key', '=', key)
    .where('completed_at', 'is', null)
    .execute();
}

type KeyPosition = { createdAt: Date; shopId: string; key: string };

/**
 * Deletes keys older than the TTL, walking the created_at index in bounded batches
 * (`purgeInBatches`), each after the last row the previous one read; a key a request holds is
 * passed over (SKIP LOCKED) and goes at the next run. Resolves to the number deleted.
 */
export async function purgeExpiredIdempotencyKeys(db: DB, options: PurgeOptions & { now?: Date } = {}): Promise<number> {
  const cutoff = new Date((options.now ?? new Date()).getTime() - IDEMPOTENCY_TTL_MS);
  return purgeInBatches<KeyPosition>(options, async (position, limit) => {
    // The index has created_at alone: the explicit bound makes the position an index range, and
    // the full key orders rows created in the same millisecond.
    const { rows } = await sql<{ read: number; deleted: number; created_at: Date | null; shop_id: string | null; key: string | null }>`
      with batch as (
        select ctid, shop_id, key, created_at from idempotency_keys
        where created_at < ${cutoff}
          ${position ? sql`and created_at >= ${position.createdAt} and (created_at, shop_id, key) > (${position.createdAt}, ${position.shopId}, ${position.key})` : sql``}
        order by created_at, shop_id, key
        limit ${limit}
        for update skip locked
      ),
      -- By ctid (a tid scan of the locked rows), never a join the planner could make a table scan.
      deleted as (delete from idempotency_keys where ctid = any(array(select ctid from batch)) returning 1)
      select (select count(*) from batch)::int as read, (select count(*) from deleted)::int as deleted, last.created_at, last.shop_id, last.key
      from (select 1) one left join (select created_at, shop_id, key from batch order by created_at desc, shop_id desc, key desc limit 1) last on true`.execute(db);
    const row = rows[0]!;
    return {
      deleted: row.deleted,
      next: row.read < limit || row.created_at === null ? null : { createdAt: row.created_at, shopId: row.shop_id!, key: row.key! },
    };
  });
}
