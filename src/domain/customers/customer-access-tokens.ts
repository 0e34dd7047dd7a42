import { timingSafeEqual } from 'node:crypto';
import { sql } from 'kysely';
import { z } from 'zod';
import type { DB } from '../../db/database.js';
import { type PurgeOptions, purgeExpiredRows } from '../../db/purge.js';
import { afterCommit, handleOf, inTransaction, type Queryable } from '../../db/transaction.js';
import { type Actor, recordAudit } from '../audit/index.js';
import { credentialCache, newId, parseInput, randomString, sha256 } from '../kernel/index.js';
import { API_KEY_CACHE_TTL_MS, type Shop } from '../shops/index.js';
import { type Customer, customerIdentifierSchema, getCustomer, toCustomer } from './customers.js';

/**
 * Customer access tokens (DESIGN.md "Storefront access"): the shop's backend, with its API key,
 * mints a token for one customer; a storefront in the browser holds it instead of the key. A token
 * lives at most 24 hours and can be revoked, with every other token of its customer, at once.
 * Only its SHA-256 is stored; it is found by its public prefix and compared in constant time. Who
 * it speaks for is cached per process as API keys are (CUSTOMER_TOKEN_CACHE_TTL_MS), never its
 * customer's record; whatever ends a token forgets it (endCustomerTokens).
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
    if (rows.length) endCustomerTokens(trx, { shopId, customerId: customer.id });
    // The tokens themselves never: how many ended is the change.
    await recordAudit(trx, shopId, actor, { kind: 'customerAccessTokens.revoke', subject: { type: 'customer', id: customer.id }, after: { revokedCount: rows.length } }, now);
    return { revokedCount: rows.length };
  });
}

/** A token's holder with its shop and the shop's storefront origins (which CORS checks the page against). */
export type StorefrontIdentity = { holder: TokenHolder; shop: Shop; storefrontOrigins: string[] };

/**
 * How long a token that authenticated stays trusted without asking the database again (the API
 * keys' time): its statement was a round of its own before every storefront request. Tokens ended
 * here are forgotten at once and the other instances told (endCustomerTokens, through the event
 * bus); a change nobody announces (SQL by hand, Redis unreachable) takes effect within this time.
 * Expiry is checked at every request.
 */
export const CUSTOMER_TOKEN_CACHE_TTL_MS = API_KEY_CACHE_TTL_MS;
const tokens = credentialCache<StorefrontIdentity>({ ttlMs: CUSTOMER_TOKEN_CACHE_TTL_MS, max: 10_000 });

/** The shop and customer a token speaks for, or null when it is malformed, unknown, forged, revoked or expired. */
export async function authenticateCustomerToken(db: Queryable, token: string, now = new Date()): Promise<StorefrontIdentity | null> {
  const match = TOKEN_PATTERN.exec(token);
  if (!match) return null;
  const prefix = match[1]!;
  const hash = sha256(token);
  const identity = await tokens.authenticate(db, prefix, hash, async () => {
    const row = await db
      .selectFrom('customer_access_tokens as t')
      .innerJoin('shops as s', 's.id', 't.shop_id')
      .select(['t.id', 't.shop_id', 't.customer_id', 't.token_hash', 't.expires_at', 't.revoked_at', 's.name', 's.created_at', 's.storefront_origins'])
      .where('t.prefix', '=', prefix)
      .executeTakeFirst();
    // Compare hashes in constant time, and do the comparison even when no row matched.
    const equal = timingSafeEqual(row ? Buffer.from(row.token_hash, 'hex') : NO_MATCH, hash);
    if (!row || !equal || row.revoked_at || row.expires_at <= now) return null;
    return {
      holder: { tokenId: row.id, shopId: row.shop_id, customerId: row.customer_id, expiresAt: row.expires_at },
      shop: { id: row.shop_id, name: row.name, createdAt: row.created_at },
      storefrontOrigins: row.storefront_origins,
    };
  });
  return identity && identity.holder.expiresAt > now ? identity : null;
}

/** Whose tokens end: one customer's, or (no customer) every one of the shop's. */
export type CustomerTokenScope = { shopId: string; customerId?: string };

/** Stops trusting, on this database handle, the cached tokens of `scope`: they ended here or on another instance. */
export function forgetCustomerTokens(db: Queryable, scope: CustomerTokenScope): void {
  tokens.forgetWhere(db, ({ holder }) => holder.shopId === scope.shopId && (scope.customerId === undefined || holder.customerId === scope.customerId));
}

// Per database handle: who tells the other instances that tokens ended here.
const announcers = new WeakMap<object, (scope: CustomerTokenScope) => void>();

/** Has `announce` tell the other instances of every end of tokens made through this handle (the server: the event bus). */
export function announceEndedTokens(db: DB, announce: (scope: CustomerTokenScope) => void): void {
  announcers.set(db, announce);
}

/**
 * The tokens of `scope` end with `db`'s changes (revoked, their customer erased or deleted, the
 * shop's storefront origins changed): once those commit, this process stops trusting them and the
 * other instances are told. Every path that ends tokens calls it, whoever runs it (a request, the
 * scheduler), so none has to remember the bus.
 */
export function endCustomerTokens(db: Queryable, scope: CustomerTokenScope): void {
  const handle = handleOf(db);
  afterCommit(db, () => {
    forgetCustomerTokens(handle, scope);
    announcers.get(handle)?.(scope);
  });
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
