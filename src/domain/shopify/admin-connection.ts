import { z } from 'zod';
import type { DB } from '../../db/database.js';
import type { Queryable } from '../../db/transaction.js';
import { inTransaction } from '../../db/transaction.js';
import { type Actor, recordAudit } from '../audit/index.js';
import { NotFoundError, parseInput, RuleViolationError, type SecretBox } from '../kernel/index.js';
import { collectionsSyncState, forgetStoreCatalogue, startCollectionsReconcile } from './product-collections.js';
import { enqueueSyncJobs } from './sync-jobs.js';

/**
 * The Admin side's connection to a shop's store (DESIGN.md "Shopify, the Admin side"): an Admin
 * API access token (a custom app), or a Dev Dashboard app's client id and secret, whose access
 * tokens come from the client-credentials grant and last 24 hours. Secrets are sealed; the
 * scopes Shopify granted are kept, so the shop sees what is missing. The calls to Shopify are
 * the transport's (src/shopify-admin); this keeps what they found.
 */

/** What the connector needs: codes created and deactivated, orders, customers and products read. */
export const REQUIRED_SCOPES = ['write_discounts', 'read_orders', 'read_customers', 'read_products'] as const;

/** Scopes Shopify grants with another (a write scope includes its read). */
const IMPLIED: Record<string, string> = { write_discounts: 'read_discounts', write_orders: 'read_orders', write_customers: 'read_customers', write_products: 'read_products' };

export function missingScopes(granted: readonly string[]): string[] {
  const have = new Set(granted);
  for (const scope of granted) if (IMPLIED[scope]) have.add(IMPLIED[scope]);
  return REQUIRED_SCOPES.filter((scope) => !have.has(scope) && !(scope.startsWith('read_') && have.has(`write_${scope.slice(5)}`)));
}

export const adminConnectionInputSchema = z
  .strictObject({
    accessToken: z.string().trim().min(8).max(512).optional(),
    clientId: z.string().trim().min(8).max(512).optional(),
    clientSecret: z.string().trim().min(8).max(512).optional(),
  })
  .superRefine((v, ctx) => {
    const token = v.accessToken !== undefined;
    const client = v.clientId !== undefined || v.clientSecret !== undefined;
    if (token === client) ctx.addIssue({ code: 'custom', path: ['accessToken'], message: 'give either an Admin API access token, or a client id and client secret' });
    else if (client && (v.clientId === undefined || v.clientSecret === undefined)) ctx.addIssue({ code: 'custom', path: [v.clientId === undefined ? 'clientId' : 'clientSecret'], message: 'required with the other' });
  });

export type AdminCredentials = { auth: 'access_token'; accessToken: string } | { auth: 'client_credentials'; clientId: string; clientSecret: string };

export function parseAdminCredentials(input: unknown): AdminCredentials {
  const data = parseInput(adminConnectionInputSchema, input);
  return data.accessToken !== undefined ? { auth: 'access_token', accessToken: data.accessToken } : { auth: 'client_credentials', clientId: data.clientId!, clientSecret: data.clientSecret! };
}

/** A connection opened for a call: the store, and the token to call it with (null: none yet, or lapsed). */
export type OpenAdminConnection = {
  shopId: string;
  shopDomain: string;
  credentials: AdminCredentials;
  accessToken: string | null;
  tokenExpiresAt: Date | null;
};

const tokenContext = (shopId: string) => `shopify-admin-token:${shopId}`;
const secretContext = (shopId: string) => `shopify-client-secret:${shopId}`;

/** The shop's store domain, which the connection needs first (shopifySettingsUpdate). */
export async function storeDomainOf(db: Queryable, shopId: string): Promise<string> {
  const row = await db.selectFrom('shops').select('shopify_domain').where('id', '=', shopId).executeTakeFirstOrThrow();
  if (!row.shopify_domain) throw new RuleViolationError('shopify_not_connected', 'set the shop\'s Shopify domain first (shopifySettingsUpdate)', ['shopDomain']);
  return row.shopify_domain;
}

/**
 * Keeps a connection the transport checked (its token works, `scopes` granted), replacing any
 * before, and queues the webhooks' registration. The first Admin connection is also when the
 * program starts for Shopify's customers, as a webhook-only connection is.
 */
export async function saveAdminConnection(
  db: DB,
  secrets: SecretBox,
  shopId: string,
  credentials: AdminCredentials,
  token: { accessToken: string; expiresAt: Date | null },
  scopes: readonly string[],
  actor?: Actor,
): Promise<void> {
  const values = {
    auth: credentials.auth,
    access_token: secrets.seal(token.accessToken, tokenContext(shopId)),
    client_id: credentials.auth === 'client_credentials' ? credentials.clientId : null,
    client_secret: credentials.auth === 'client_credentials' ? secrets.seal(credentials.clientSecret, secretContext(shopId)) : null,
    token_expires_at: token.expiresAt,
    scopes: JSON.stringify(scopes),
  };
  await inTransaction(db, async (trx) => {
    const before = await trx.selectFrom('shopify_admin_connections').select(['auth', 'client_id', 'scopes']).where('shop_id', '=', shopId).forUpdate().executeTakeFirst();
    await trx
      .insertInto('shopify_admin_connections')
      .values({ shop_id: shopId, ...values })
      .onConflict((oc) => oc.column('shop_id').doUpdateSet({ ...values, connected_at: new Date() }))
      .execute();
    await trx.updateTable('shops').set({ shopify_connected_at: new Date() }).where('id', '=', shopId).where('shopify_connected_at', 'is', null).execute();
    await enqueueSyncJobs(trx, [{ shopId, kind: 'webhooks_register', subject: '' }]);
    await startCollectionsReconcile(trx, shopId);
    // The connection's state, as adminConnectionView shows it: never a token or a secret.
    await recordAudit(trx, shopId, actor, { kind: 'shopifyAdmin.connect', subject: { type: 'shop', id: shopId }, before: before && connectionState(before), after: connectionState({ auth: credentials.auth, client_id: values.client_id, scopes }) });
  });
}

function connectionState(row: { auth: AdminCredentials['auth']; client_id: string | null; scopes: readonly string[] }) {
  return { auth: row.auth, clientId: row.client_id, scopes: row.scopes };
}

export async function openAdminConnection(db: Queryable, secrets: SecretBox, shopId: string): Promise<OpenAdminConnection | null> {
  const row = await db
    .selectFrom('shopify_admin_connections as c')
    .innerJoin('shops as s', 's.id', 'c.shop_id')
    .select(['c.auth', 'c.access_token', 'c.client_id', 'c.client_secret', 'c.token_expires_at', 's.shopify_domain'])
    .where('c.shop_id', '=', shopId)
    .executeTakeFirst();
  if (!row || !row.shopify_domain) return null;
  const credentials: AdminCredentials =
    row.auth === 'access_token'
      ? { auth: 'access_token', accessToken: secrets.open(row.access_token!, tokenContext(shopId)) }
      : { auth: 'client_credentials', clientId: row.client_id!, clientSecret: secrets.open(row.client_secret!, secretContext(shopId)) };
  return {
    shopId,
    shopDomain: row.shopify_domain,
    credentials,
    accessToken: row.access_token ? secrets.open(row.access_token, tokenContext(shopId)) : null,
    tokenExpiresAt: row.token_expires_at,
  };
}

/** Keeps a token the client-credentials grant renewed. */
export async function renewAdminToken(db: Queryable, secrets: SecretBox, shopId: string, accessToken: string, expiresAt: Date, scopes: readonly string[]): Promise<void> {
  await db
    .updateTable('shopify_admin_connections')
    .set({ access_token: secrets.seal(accessToken, tokenContext(shopId)), token_expires_at: expiresAt, scopes: JSON.stringify(scopes) })
    .where('shop_id', '=', shopId)
    .execute();
}

/** Forgets the connection: its secrets, its queued work, the webhooks' states (the transport removed them from Shopify first) and what was read of the catalogue, which nothing would keep fresh. */
export async function deleteAdminConnection(db: DB, shopId: string, actor?: Actor): Promise<void> {
  await inTransaction(db, async (trx) => {
    const gone = await trx.deleteFrom('shopify_admin_connections').where('shop_id', '=', shopId).returning(['auth', 'client_id', 'scopes']).executeTakeFirst();
    if (!gone) throw new NotFoundError('shopify_admin_not_connected', 'the shop has no Shopify Admin connection');
    await recordAudit(trx, shopId, actor, { kind: 'shopifyAdmin.disconnect', subject: { type: 'shop', id: shopId }, before: connectionState(gone) });
    await trx.deleteFrom('shopify_sync_jobs').where('shop_id', '=', shopId).execute();
    await trx.deleteFrom('shopify_webhook_registrations').where('shop_id', '=', shopId).execute();
    await forgetStoreCatalogue(trx, shopId);
    // Codes waiting to be created will not be: they stay usable where the shop applies them by hand.
    await trx.updateTable('discount_codes').set({ shopify_sync: null }).where('shop_id', '=', shopId).where('shopify_sync', '=', 'pending').execute();
  });
}

export type WebhookRegistration = { topic: string; state: 'pending' | 'registered' | 'failed'; error: string | null; updatedAt: Date };
export type AdminConnectionView = {
  auth: AdminCredentials['auth'];
  clientId: string | null;
  scopes: string[];
  missingScopes: string[];
  connectedAt: Date;
  tokenExpiresAt: Date | null;
  webhooks: WebhookRegistration[];
  codes: { pending: number; synced: number; failed: number };
  /** What was read of the catalogue for rules' collection lists: products read, and when the last full pass ended. */
  catalogue: { products: number; reconciledAt: Date | null };
};

/** What the shop sees of its Admin connection; null when there is none. Never a secret. */
export async function adminConnectionView(db: Queryable, shopId: string): Promise<AdminConnectionView | null> {
  const row = await db.selectFrom('shopify_admin_connections').select(['auth', 'client_id', 'scopes', 'connected_at', 'token_expires_at']).where('shop_id', '=', shopId).executeTakeFirst();
  if (!row) return null;
  const [webhooks, codes, catalogue] = await Promise.all([
    db.selectFrom('shopify_webhook_registrations').select(['topic', 'state', 'error', 'updated_at']).where('shop_id', '=', shopId).orderBy('topic').execute(),
    db
      .selectFrom('discount_codes')
      .select(['shopify_sync', (eb) => eb.fn.countAll<string>().as('n')])
      .where('shop_id', '=', shopId)
      .where('shopify_sync', 'is not', null)
      .groupBy('shopify_sync')
      .execute(),
    collectionsSyncState(db, shopId),
  ]);
  const count = (state: string) => Number(codes.find((c) => c.shopify_sync === state)?.n ?? 0);
  return {
    auth: row.auth,
    clientId: row.client_id,
    scopes: row.scopes,
    missingScopes: missingScopes(row.scopes),
    connectedAt: row.connected_at,
    tokenExpiresAt: row.token_expires_at,
    webhooks: webhooks.map((w) => ({ topic: w.topic, state: w.state, error: w.error, updatedAt: w.updated_at })),
    codes: { pending: count('pending'), synced: count('synced'), failed: count('failed') },
    catalogue,
  };
}

/** Records a topic's subscription in Shopify as the registration job found it. */
export async function recordWebhookRegistration(db: Queryable, shopId: string, topic: string, state: WebhookRegistration['state'], shopifyId: string | null, error: string | null): Promise<void> {
  await db
    .insertInto('shopify_webhook_registrations')
    .values({ shop_id: shopId, topic, state, shopify_id: shopifyId, error })
    .onConflict((oc) => oc.columns(['shop_id', 'topic']).doUpdateSet({ state, shopify_id: shopifyId, error, updated_at: new Date() }))
    .execute();
}

/** The subscriptions recorded as registered, for the disconnection to remove. */
export async function registeredWebhooks(db: Queryable, shopId: string): Promise<Array<{ topic: string; shopifyId: string }>> {
  const rows = await db.selectFrom('shopify_webhook_registrations').select(['topic', 'shopify_id']).where('shop_id', '=', shopId).where('shopify_id', 'is not', null).execute();
  return rows.map((r) => ({ topic: r.topic, shopifyId: r.shopify_id! }));
}
