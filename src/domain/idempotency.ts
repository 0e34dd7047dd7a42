import { setTimeout as sleep } from 'node:timers/promises';
import type { DB } from '../db/database.js';
import { ConflictError, RuleViolationError } from './errors.js';

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

export async function purgeExpiredIdempotencyKeys(db: DB): Promise<number> {
  const result = await db
    .deleteFrom('idempotency_keys')
    .where('created_at', '<', new Date(Date.now() - IDEMPOTENCY_TTL_MS))
    .executeTakeFirst();
  return Number(result.numDeletedRows);
}
