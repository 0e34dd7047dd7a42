import type { DB } from '../db/database.js';
import type { Actor } from '../domain/audit/index.js';
import { RuleViolationError, type SecretBox } from '../domain/kernel/index.js';
import {
  type AdminConnectionView, adminConnectionView, type AdminCredentials, deleteAdminConnection, missingScopes, openAdminConnection,
  parseAdminCredentials, registeredWebhooks, saveAdminConnection, storeDomainOf,
} from '../domain/shopify/index.js';
import { adminClient, clientCredentialsToken, ShopifyAdminError, type StoreUrls } from './client.js';
import { APP_SCOPES, WEBHOOK_SUBSCRIPTION_DELETE } from './operations.js';
import type { ShopifySyncWorker } from './sync-worker.js';

/**
 * Connecting a shop's store to the Admin API and disconnecting it (issue 34, item 1): what the
 * GraphQL mutations call. Connecting proves the credentials (a token from the client-credentials
 * grant when given a client id and secret), reads the scopes Shopify granted and refuses, saying
 * which, when one the connector needs is missing; then the webhooks' registration is queued.
 * Disconnecting removes from Shopify what connecting registered, then forgets the secrets.
 */
export type ShopifyAdmin = {
  /** `actor`: who asks, for the audit log (the connection's state, never its secrets). */
  connect(shopId: string, input: unknown, actor?: Actor): Promise<AdminConnectionView>;
  disconnect(shopId: string, actor?: Actor): Promise<void>;
};

export function createShopifyAdmin(options: { db: DB; secrets: SecretBox; urls: StoreUrls; worker: ShopifySyncWorker; now?: () => number }): ShopifyAdmin {
  const { db, secrets, urls, worker } = options;
  const now = options.now ?? Date.now;

  /** A token for `credentials` and the scopes it carries, or the error the shop can act on. */
  async function prove(shopDomain: string, credentials: AdminCredentials): Promise<{ accessToken: string; expiresAt: Date | null; scopes: string[] }> {
    try {
      let accessToken: string;
      let expiresAt: Date | null = null;
      if (credentials.auth === 'access_token') accessToken = credentials.accessToken;
      else {
        const granted = await clientCredentialsToken(urls, shopDomain, credentials.clientId, credentials.clientSecret);
        accessToken = granted.accessToken;
        expiresAt = new Date(now() + granted.expiresInSeconds * 1000);
      }
      type Scopes = { currentAppInstallation: { accessScopes: Array<{ handle: string }> } };
      const { data } = await adminClient(urls, shopDomain, accessToken).request<Scopes>(APP_SCOPES.query);
      return { accessToken, expiresAt, scopes: data.currentAppInstallation.accessScopes.map((s) => s.handle) };
    } catch (err) {
      if (!(err instanceof ShopifyAdminError)) throw err;
      const field = credentials.auth === 'access_token' ? 'accessToken' : 'clientSecret';
      if (err.kind === 'unauthorized') throw new RuleViolationError('shopify_credentials_refused', `${shopDomain} refused the credentials: ${err.message}`, [field]);
      throw new RuleViolationError('shopify_unreachable', `${shopDomain} could not be reached to check the credentials (${err.message}); try again`, [field]);
    }
  }

  return {
    async connect(shopId, input, actor) {
      const credentials = parseAdminCredentials(input);
      const shopDomain = await storeDomainOf(db, shopId);
      const proven = await prove(shopDomain, credentials);
      const missing = missingScopes(proven.scopes);
      if (missing.length) {
        throw new RuleViolationError(
          'shopify_scopes_missing',
          `the app installed on ${shopDomain} lacks the access scopes ${missing.join(', ')}; grant them in the app's configuration and connect again`,
          [credentials.auth === 'access_token' ? 'accessToken' : 'clientId'],
        );
      }
      await saveAdminConnection(db, secrets, shopId, credentials, proven, proven.scopes, actor);
      worker.wake();
      return (await adminConnectionView(db, shopId))!;
    },

    async disconnect(shopId, actor) {
      const connection = await openAdminConnection(db, secrets, shopId);
      if (connection) {
        // Best effort: a store that no longer answers, or credentials revoked already, leaves nothing of ours working there.
        try {
          const client = adminClient(urls, connection.shopDomain, await worker.tokenFor(connection));
          for (const { shopifyId } of await registeredWebhooks(db, shopId)) await client.request(WEBHOOK_SUBSCRIPTION_DELETE.query, { id: shopifyId });
        } catch (err) {
          if (!(err instanceof ShopifyAdminError)) throw err;
        }
      }
      await deleteAdminConnection(db, shopId, actor);
    },
  };
}
