import { createHash, timingSafeEqual } from 'node:crypto';
import type { DB } from '../db/database.js';
import type { Queryable } from '../db/transaction.js';
import { NotFoundError } from './errors.js';
import { newId, randomString } from './ids.js';

export type Shop = { id: string; name: string; createdAt: Date };
export type ApiKeyInfo = { id: string; prefix: string; createdAt: Date; revokedAt: Date | null };

const LOWER_ALNUM = 'abcdefghijklmnopqrstuvwxyz0123456789';
const ALNUM = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';
// `lk_<prefix>_<secret>`: the prefix is public (it finds the row and names the key in listings),
// the secret carries ~238 bits of randomness and is never stored, only its SHA-256.
const KEY_PATTERN = /^lk_([a-z0-9]{10})_[A-Za-z0-9]{40}$/;

function sha256(value: string): Buffer {
  return createHash('sha256').update(value).digest();
}

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

export async function createApiKey(db: Queryable, shopId: string): Promise<{ apiKey: string; key: ApiKeyInfo }> {
  await getShop(db, shopId);
  const prefix = randomString(10, LOWER_ALNUM);
  const apiKey = `lk_${prefix}_${randomString(40, ALNUM)}`;
  const row = await db
    .insertInto('api_keys')
    .values({ id: newId(), shop_id: shopId, prefix, key_hash: sha256(apiKey).toString('hex'), revoked_at: null })
    .returning(['id', 'prefix', 'created_at', 'revoked_at'])
    .executeTakeFirstOrThrow();
  return { apiKey, key: { id: row.id, prefix: row.prefix, createdAt: row.created_at, revokedAt: row.revoked_at } };
}

/** Revokes a key by its prefix (`lk_abc…` or just the ten prefix characters). */
export async function revokeApiKey(db: Queryable, shopId: string, prefixOrKey: string): Promise<ApiKeyInfo> {
  const prefix = prefixOrKey.replace(/^lk_/, '').slice(0, 10);
  const row = await db
    .updateTable('api_keys')
    .set({ revoked_at: new Date() })
    .where('shop_id', '=', shopId)
    .where('prefix', '=', prefix)
    .returning(['id', 'prefix', 'created_at', 'revoked_at'])
    .executeTakeFirst();
  if (!row) throw new NotFoundError('api_key_not_found', `shop ${shopId} has no key with prefix ${prefix}`);
  return { id: row.id, prefix: row.prefix, createdAt: row.created_at, revokedAt: row.revoked_at };
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

const NO_MATCH = sha256('no such key');

/** The shop a presented API key belongs to, or null for a malformed, unknown or revoked key. */
export async function authenticateApiKey(db: Queryable, apiKey: string): Promise<Shop | null> {
  const match = KEY_PATTERN.exec(apiKey);
  if (!match) return null;
  const row = await db
    .selectFrom('api_keys')
    .innerJoin('shops', 'shops.id', 'api_keys.shop_id')
    .select(['api_keys.key_hash', 'api_keys.revoked_at', 'shops.id', 'shops.name', 'shops.created_at'])
    .where('api_keys.prefix', '=', match[1]!)
    .executeTakeFirst();
  const stored = row ? Buffer.from(row.key_hash, 'hex') : NO_MATCH;
  // Compare hashes in constant time, and do the comparison even when no row matched.
  const equal = timingSafeEqual(stored, sha256(apiKey));
  if (!row || !equal || row.revoked_at) return null;
  return { id: row.id, name: row.name, createdAt: row.created_at };
}
