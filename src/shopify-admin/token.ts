import type { DB } from '../db/database.js';
import type { SecretBox } from '../domain/kernel/index.js';
import { type OpenAdminConnection, renewAdminToken } from '../domain/shopify/index.js';
import { clientCredentialsToken, type StoreUrls } from './client.js';

/** A client-credentials token is renewed this long before it lapses. */
const RENEW_BEFORE_MS = 60 * 60 * 1000;

/**
 * A working token for the shop's connection: its access token, or the client-credentials one,
 * renewed (and kept) when it is about to lapse. Shared by the sync worker and the history import.
 */
export async function adminToken(db: DB, secrets: SecretBox, urls: StoreUrls, connection: OpenAdminConnection, now = Date.now(), timeoutMs?: number): Promise<string> {
  const { credentials } = connection;
  if (credentials.auth === 'access_token') return credentials.accessToken;
  if (connection.accessToken && connection.tokenExpiresAt && connection.tokenExpiresAt.getTime() - now > RENEW_BEFORE_MS) return connection.accessToken;
  const granted = await clientCredentialsToken(urls, connection.shopDomain, credentials.clientId, credentials.clientSecret, timeoutMs);
  const expiresAt = new Date(now + granted.expiresInSeconds * 1000);
  await renewAdminToken(db, secrets, connection.shopId, granted.accessToken, expiresAt, granted.scopes);
  connection.accessToken = granted.accessToken;
  connection.tokenExpiresAt = expiresAt;
  return granted.accessToken;
}
