import { timingSafeEqual } from 'node:crypto';
import { z } from 'zod';
import type { DB } from '../../db/database.js';
import { inTransaction, type Queryable, type Trx } from '../../db/transaction.js';
import { type Actor, recordAudit } from '../audit/index.js';
import { ConflictError, credentialCache, newId, NotFoundError, parseInput, randomString, RuleViolationError, sha256 } from '../kernel/index.js';

export type Shop = { id: string; name: string; createdAt: Date };
export type ApiKeyInfo = { id: string; prefix: string; createdAt: Date; revokedAt: Date | null };
/** Which key a request presented: its id and public prefix, never its secret. */
export type ApiKeyRef = { id: string; prefix: string };
/** Who is calling: the shop, and the key that authenticated the call. */
export type Identity = { shop: Shop; apiKey: ApiKeyRef };

const LOWER_ALNUM = 'abcdefghijklmnopqrstuvwxyz0123456789';
const ALNUM = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';
// `lk_<prefix>_<secret>`: the prefix is public (it finds the row and names the key in listings),
// the secret carries ~238 bits of randomness and is never stored, only its SHA-256.
const KEY_PATTERN = /^lk_([a-z0-9]{10})_[A-Za-z0-9]{40}$/;

export async function createShop(db: DB, name: string): Promise<{ shop: Shop; apiKey: string }> {
  return db.transaction().execute(async (trx) => {
    const row = await trx
      .insertInto('shops')
      .values({ id: newId(), name })
      .returning(['id', 'name', 'created_at'])
      .executeTakeFirstOrThrow();
    const { apiKey } = await createApiKey(trx, row.id);
    return { shop: { id: row.id, name: row.name, createdAt: row.created_at }, apiKey };
  });
}

export async function getShop(db: Queryable, shopId: string): Promise<Shop> {
  const row = await db.selectFrom('shops').selectAll().where('id', '=', shopId).executeTakeFirst();
  if (!row) throw new NotFoundError('shop_not_found', `no shop with id ${shopId}`);
  return { id: row.id, name: row.name, createdAt: row.created_at };
}

export type ShopListing = Shop & { activeKeys: number };

/** Every shop, oldest first, with how many of its API keys still work (the CLI's `shop list`). */
export async function listShops(db: Queryable): Promise<ShopListing[]> {
  const rows = await db
    .selectFrom('shops')
    .leftJoin('api_keys', (join) => join.onRef('api_keys.shop_id', '=', 'shops.id').on('api_keys.revoked_at', 'is', null))
    .select(['shops.id', 'shops.name', 'shops.created_at', (eb) => eb.fn.count<string>('api_keys.id').as('active_keys')])
    .groupBy(['shops.id', 'shops.name', 'shops.created_at'])
    .orderBy('shops.created_at')
    .orderBy('shops.id')
    .execute();
  return rows.map((r) => ({ id: r.id, name: r.name, createdAt: r.created_at, activeKeys: Number(r.active_keys) }));
}

/**
 * A shop by its id or, failing that, by its exact name, so a person can type what `shop list` or
 * the start-up banner shows. Names are not unique: one that several shops share is refused.
 */
export async function findShop(db: Queryable, idOrName: string): Promise<Shop> {
  const rows = await db
    .selectFrom('shops')
    .selectAll()
    .where((eb) => eb.or([eb('id', '=', idOrName), eb('name', '=', idOrName)]))
    .orderBy('created_at')
    .execute();
  const match = rows.find((r) => r.id === idOrName) ?? (rows.length === 1 ? rows[0] : undefined);
  if (match) return { id: match.id, name: match.name, createdAt: match.created_at };
  if (rows.length > 1) {
    throw new ConflictError('shop_name_ambiguous', `${rows.length} shops are named "${idOrName}" (ids ${rows.map((r) => r.id).join(', ')}): give the id`);
  }
  throw new NotFoundError('shop_not_found', `no shop with id or name "${idOrName}"`);
}

export async function createApiKey(db: Queryable, shopId: string, actor?: Actor): Promise<{ apiKey: string; key: ApiKeyInfo }> {
  // Audited in the key's own transaction.
  if (actor && !db.isTransaction) return inTransaction(db as DB, (trx) => createApiKey(trx, shopId, actor));
  await getShop(db, shopId);
  const prefix = randomString(10, LOWER_ALNUM);
  const apiKey = `lk_${prefix}_${randomString(40, ALNUM)}`;
  const row = await db
    .insertInto('api_keys')
    .values({ id: newId(), shop_id: shopId, prefix, key_hash: sha256(apiKey).toString('hex'), revoked_at: null })
    .returning(['id', 'prefix', 'created_at', 'revoked_at'])
    .executeTakeFirstOrThrow();
  const key = { id: row.id, prefix: row.prefix, createdAt: row.created_at, revokedAt: row.revoked_at };
  if (actor) await recordAudit(db as Trx, shopId, actor, { kind: 'apiKey.create', subject: { type: 'apiKey', id: row.id }, after: { prefix: `lk_${row.prefix}` } });
  return { apiKey, key };
}

/**
 * Revokes a key by its prefix (`lk_abc…` or just the ten prefix characters). Given the database
 * (not a transaction), the key stops working in this process as this resolves; every other
 * process stops trusting it within API_KEY_CACHE_TTL_MS, or at once when told (forgetApiKey).
 */
export async function revokeApiKey(db: DB, shopId: string, prefixOrKey: string, actor?: Actor): Promise<ApiKeyInfo> {
  const prefix = prefixOrKey.replace(/^lk_/, '').slice(0, 10);
  const row = await inTransaction(db, async (trx) => {
    const before = await trx.selectFrom('api_keys').select('revoked_at').where('shop_id', '=', shopId).where('prefix', '=', prefix).forUpdate().executeTakeFirst();
    const after = await trx
      .updateTable('api_keys')
      // Revoking again keeps the time of the first revocation.
      .set((eb) => ({ revoked_at: eb.fn.coalesce('revoked_at', eb.val(new Date())) }))
      .where('shop_id', '=', shopId)
      .where('prefix', '=', prefix)
      .returning(['id', 'prefix', 'created_at', 'revoked_at'])
      .executeTakeFirst();
    if (after && before) {
      await recordAudit(trx, shopId, actor, { kind: 'apiKey.revoke', subject: { type: 'apiKey', id: after.id }, before: { prefix: `lk_${prefix}`, revokedAt: before.revoked_at }, after: { prefix: `lk_${prefix}`, revokedAt: after.revoked_at } });
    }
    return after;
  });
  forgetApiKey(db, prefix);
  if (!row) throw new NotFoundError('api_key_not_found', `shop ${shopId} has no key with prefix ${prefix}`);
  return { id: row.id, prefix: row.prefix, createdAt: row.created_at, revokedAt: row.revoked_at };
}

export const apiKeyRevokeInputSchema = z.strictObject({
  prefix: z
    .string()
    .trim()
    .regex(/^(lk_)?[a-z0-9]{10}$/, 'an API key prefix: lk_ and ten characters, as apiKeys lists it')
    .transform((p) => p.replace(/^lk_/, '')),
});

/**
 * Revokes one of the shop's keys on behalf of a request made with `requestKey` (null: a person
 * signed in), which cannot revoke itself: a shop cannot lock itself out by mistake. To rotate, create a key, switch to it,
 * and revoke the old one with the new one.
 */
export async function revokeApiKeyOnRequest(db: DB, shopId: string, input: unknown, requestKey: ApiKeyRef | null, actor?: Actor): Promise<ApiKeyInfo> {
  const { prefix } = parseInput(apiKeyRevokeInputSchema, input);
  if (requestKey?.prefix === prefix) {
    throw new RuleViolationError('api_key_in_use', 'a key cannot revoke itself: revoke it with another of the shop\'s keys', ['prefix']);
  }
  return revokeApiKey(db, shopId, prefix, actor);
}

export async function listApiKeys(db: Queryable, shopId: string): Promise<ApiKeyInfo[]> {
  const rows = await db
    .selectFrom('api_keys')
    .select(['id', 'prefix', 'created_at', 'revoked_at'])
    .where('shop_id', '=', shopId)
    .orderBy('created_at', 'desc')
    .execute();
  return rows.map((r) => ({ id: r.id, prefix: r.prefix, createdAt: r.created_at, revokedAt: r.revoked_at }));
}

/** Which of these keys (by id) are revoked: revocations made where no event bus reaches, such as the CLI. */
export async function revokedApiKeys(db: Queryable, ids: readonly string[]): Promise<ApiKeyRef[]> {
  if (ids.length === 0) return [];
  return db.selectFrom('api_keys').select(['id', 'prefix']).where('id', 'in', ids).where('revoked_at', 'is not', null).execute();
}

const NO_MATCH = sha256('no such key');

/**
 * How long a key that authenticated stays trusted without asking the database again. Every
 * request used to cost one query for its key; at a few hundred requests a second that query
 * was a seventh of the database round trips of a points change. A revocation in this process
 * takes effect at once (revokeApiKey forgets the key); one made by another process takes effect
 * here when this process is told (forgetApiKey, from the event bus) or, at the latest, within
 * this time (the CLI tells no one; src/events/revocation-watch.ts ends what such a key holds open).
 */
export const API_KEY_CACHE_TTL_MS = 2_000;
const apiKeys = credentialCache<Identity>({ ttlMs: API_KEY_CACHE_TTL_MS, max: 10_000 });

/** Stops trusting the cached key with this prefix on this database handle: it was revoked. */
export function forgetApiKey(db: Queryable, prefix: string): void {
  apiKeys.forget(db, prefix);
}

/** Who presents this API key, or null for a malformed, unknown or revoked key. */
export async function authenticateApiKey(db: Queryable, apiKey: string): Promise<Identity | null> {
  const match = KEY_PATTERN.exec(apiKey);
  if (!match) return null;
  const prefix = match[1]!;
  const hash = sha256(apiKey);
  return apiKeys.authenticate(db, prefix, hash, async () => {
    const row = await db
      .selectFrom('api_keys')
      .innerJoin('shops', 'shops.id', 'api_keys.shop_id')
      .select(['api_keys.id as key_id', 'api_keys.key_hash', 'api_keys.revoked_at', 'shops.id', 'shops.name', 'shops.created_at'])
      .where('api_keys.prefix', '=', prefix)
      .executeTakeFirst();
    // Compare hashes in constant time, and do the comparison even when no row matched.
    const equal = timingSafeEqual(row ? Buffer.from(row.key_hash, 'hex') : NO_MATCH, hash);
    if (!row || !equal || row.revoked_at) return null;
    return { shop: { id: row.id, name: row.name, createdAt: row.created_at }, apiKey: { id: row.key_id, prefix } };
  });
}
