import { timingSafeEqual } from 'node:crypto';
import { sql } from 'kysely';
import { z } from 'zod';
import type { DB } from '../../db/database.js';
import { type PurgeOptions, purgeExpiredRows } from '../../db/purge.js';
import { inTransaction, type Queryable } from '../../db/transaction.js';
import { type Actor, recordAudit } from '../audit/index.js';
import { newId, parseInput, randomString, sha256 } from '../kernel/index.js';
import type { Shop } from '../shops/index.js';
import { type Customer, customerIdentifierSchema, getCustomer, toCustomer } from './customers.js';

/**
 * Customer access tokens (DESIGN.md "Storefront access"): the shop's backend, with its API key,
 * mints a token for one customer; a storefront in the browser holds it instead of the key. A token
 * lives at most 24 hours and can be revoked, with every other token of its customer, at once.
 * Only its SHA-256 is stored; it is found by its public prefix and compared in constant time.
 */
export type CustomerAccessToken = { accessToken: string; expiresAt: Date; customer: Customer };

/** Who a valid token speaks for. */
export type TokenHolder = { tokenId: string; shopId: string; customerId: string; expiresAt: Date };

export const TOKEN_LIFETIME = { defaultSeconds: 3600, minSeconds: 60, maxSeconds: 86_400 } as const;

const LOWER_ALNUM = 'abcdefghijklmnopqrstuvwxyz0123456789';
const ALNUM = `${LOWER_ALNUM}ABCDEFGHIJKLMNOPQRSTUVWXYZ`;
// `ct_<prefix>_<secret>`: like an API key (`lk_…`), told apart from one at a glance.
const TOKEN_PATTERN = /^ct_([a-z0-9]{10})_[A-Za-z0-9]{40}$/;
const NO_MATCH = sha256('no such token');

export const customerAccessTokenInputSchema = z.strictObject({
  customerIdentifier: customerIdentifierSchema,
  expiresInSeconds: z.number().int().min(TOKEN_LIFETIME.minSeconds).max(TOKEN_LIFETIME.maxSeconds).optional(),
});

export async function createCustomerAccessToken(db: Queryable, shopId: string, input: unknown, now = new Date()): Promise<CustomerAccessToken> {
  const data = parseInput(customerAccessTokenInputSchema, input);
  const customer = await getCustomer(db, shopId, data.customerIdentifier);
  const prefix = randomString(10, LOWER_ALNUM);
  const accessToken = `ct_${prefix}_${randomString(40, ALNUM)}`;
  const expiresAt = new Date(now.getTime() + (data.expiresInSeconds ?? TOKEN_LIFETIME.defaultSeconds) * 1000);
  await db
    .insertInto('customer_access_tokens')
    .values({ id: newId(), shop_id: shopId, customer_id: customer.id, prefix, token_hash: sha256(accessToken).toString('hex'), expires_at: expiresAt })
    .execute();
  return { accessToken, expiresAt, customer: toCustomer(customer) };
}

export const customerAccessTokensRevokeInputSchema = z.strictObject({ customerIdentifier: customerIdentifierSchema });

/** Revokes every live token of the customer (a logout everywhere, a compromised device); returns how many. */
export async function revokeCustomerAccessTokens(db: DB, shopId: string, input: unknown, now = new Date(), actor?: Actor): Promise<{ revokedCount: number }> {
  const data = parseInput(customerAccessTokensRevokeInputSchema, input);
  return inTransaction(db, async (trx) => {
    const customer = await getCustomer(trx, shopId, data.customerIdentifier);
    const rows = await trx
      .updateTable('customer_access_tokens')
      .set({ revoked_at: now })
      .where('customer_id', '=', customer.id)
      .where('revoked_at', 'is', null)
      .where('expires_at', '>', now)
      .returning('id')
      .execute();
    // The tokens themselves never: how many ended is the change.
    await recordAudit(trx, shopId, actor, { kind: 'customerAccessTokens.revoke', subject: { type: 'customer', id: customer.id }, after: { revokedCount: rows.length } }, now);
    return { revokedCount: rows.length };
  });
}

/**
 * A token's holder with its shop and the customer's record, as one query reads them for each
 * storefront request (the record is as of that read: for that request only, never a socket's life).
 */
export type StorefrontIdentity = { holder: TokenHolder; shop: Shop; storefrontOrigins: string[]; customer: Customer };

/** The shop and customer a token speaks for, or null when it is malformed, unknown, forged, revoked or expired. */
export async function authenticateCustomerToken(db: Queryable, token: string, now = new Date()): Promise<StorefrontIdentity | null> {
  const match = TOKEN_PATTERN.exec(token);
  if (!match) return null;
  const row = await db
    .selectFrom('customer_access_tokens as t')
    .innerJoin('shops as s', 's.id', 't.shop_id')
    .innerJoin('customers as c', 'c.id', 't.customer_id')
    .selectAll('c')
    .select([
      't.id as token_id', 't.shop_id as token_shop_id', 't.token_hash', 't.expires_at as token_expires_at', 't.revoked_at as token_revoked_at',
      's.name as shop_name', 's.created_at as shop_created_at', 's.storefront_origins',
    ])
    .where('t.prefix', '=', match[1]!)
    .executeTakeFirst();
  // Compare hashes in constant time, and do the comparison even when no row matched.
  const equal = timingSafeEqual(row ? Buffer.from(row.token_hash, 'hex') : NO_MATCH, sha256(token));
  if (!row || !equal || row.token_revoked_at || row.token_expires_at <= now) return null;
  const { token_id, token_shop_id, token_hash, token_expires_at, token_revoked_at, shop_name, shop_created_at, storefront_origins, ...customer } = row;
  return {
    holder: { tokenId: token_id, shopId: token_shop_id, customerId: customer.id, expiresAt: token_expires_at },
    shop: { id: token_shop_id, name: shop_name, createdAt: shop_created_at },
    storefrontOrigins: storefront_origins,
    customer: toCustomer(customer),
  };
}

/** Whether some shop lets pages of `origin` call the storefront: a preflight carries no token to say which shop. */
export async function isStorefrontOrigin(db: Queryable, origin: string): Promise<boolean> {
  const row = await db
    .selectFrom('shops')
    .select('id')
    .where(sql<boolean>`storefront_origins @> array[${origin}]::text[]`)
    .limit(1)
    .executeTakeFirst();
  return row !== undefined;
}

/** Whether the token is still neither revoked nor expired (nor gone with its customer): live streams ask before each event. */
export async function isTokenLive(db: Queryable, holder: TokenHolder, now = new Date()): Promise<boolean> {
  if (holder.expiresAt <= now) return false;
  const row = await db.selectFrom('customer_access_tokens').select('revoked_at').where('id', '=', holder.tokenId).executeTakeFirst();
  return row !== undefined && row.revoked_at === null;
}

/** Deletes tokens that expired before `before` (a day ago, in the retention loop), oldest first, in bounded batches. */
export function purgeExpiredCustomerAccessTokens(db: DB, before: Date, options: PurgeOptions = {}): Promise<number> {
  return purgeExpiredRows(db, 'customer_access_tokens', before, options);
}
