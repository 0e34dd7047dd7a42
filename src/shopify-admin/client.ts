import { createAdminApiClient } from '@shopify/admin-api-client';

/**
 * Calls to a shop's Shopify Admin GraphQL API (DESIGN.md "Shopify, the Admin side"), through
 * Shopify's own client (@shopify/admin-api-client) on one pinned API version. Every answer is
 * sorted into data, or an error that says whether trying again can help; the cost Shopify
 * reports feeds the shop's throttle (throttle.ts).
 */

/** The one API version every call uses; test/fixtures/shopify holds its schema, which every document is checked against. */
export const SHOPIFY_API_VERSION = '2026-07';

/** Where a store's Admin API lives: `https://{shop}` in production; a stand-in's address in tests and demos. */
export type StoreUrls = { baseUrlTemplate: string };
export const SHOPIFY_STORE_URLS: StoreUrls = { baseUrlTemplate: 'https://{shop}' };

export const storeBase = (urls: StoreUrls, shopDomain: string) => urls.baseUrlTemplate.replace('{shop}', shopDomain);

/** Shopify's throttle status, as its responses' extensions.cost give it. */
export type ThrottleStatus = { maximumAvailable: number; currentlyAvailable: number; restoreRate: number };
export type CallCost = { requested: number; actual: number | null; throttle: ThrottleStatus | null };

/**
 * Why a call failed. `throttled`: the bucket was empty, try again when it refills (not the job's
 * fault); `unavailable`: Shopify or the network failed, try again later; `unauthorized`: the
 * credentials no longer work (the connection needs the shop); `refused`: Shopify answered that the
 * document or its input is wrong, which trying again will not change.
 */
export type AdminErrorKind = 'throttled' | 'unavailable' | 'unauthorized' | 'refused';

export class ShopifyAdminError extends Error {
  constructor(
    readonly kind: AdminErrorKind,
    message: string,
    readonly cost: CallCost | null = null,
  ) {
    super(message);
    this.name = 'ShopifyAdminError';
  }
}

export type AdminClient = {
  request<T>(query: string, variables?: Record<string, unknown>): Promise<{ data: T; cost: CallCost | null }>;
};

type GraphQLErrorShape = { message?: string; extensions?: { code?: string } };

export function adminClient(urls: StoreUrls, shopDomain: string, accessToken: string, timeoutMs = 15_000): AdminClient {
  const base = storeBase(urls, shopDomain);
  const client = createAdminApiClient({
    storeDomain: shopDomain,
    apiVersion: SHOPIFY_API_VERSION,
    accessToken,
    // The client builds https://{shop}/admin/api/...; the base URL decides where that really is.
    customFetchApi: (url, init) => fetch(String(url).replace(`https://${shopDomain}`, base), { ...init, signal: AbortSignal.timeout(timeoutMs) }),
  });
  return {
    async request<T>(query: string, variables?: Record<string, unknown>) {
      let response;
      try {
        response = await client.request<T>(query, variables ? { variables } : undefined);
      } catch (err) {
        throw new ShopifyAdminError('unavailable', `Shopify did not answer: ${(err as Error).message}`);
      }
      const cost = costOf(response.extensions);
      const errors = response.errors;
      if (errors) {
        const graphQLErrors = (errors.graphQLErrors ?? []) as GraphQLErrorShape[];
        const status = errors.networkStatusCode;
        if (graphQLErrors.some((e) => e.extensions?.code === 'THROTTLED') || status === 429) throw new ShopifyAdminError('throttled', 'Shopify throttled the call', cost);
        if (status === 401 || status === 403) throw new ShopifyAdminError('unauthorized', `Shopify refused the credentials (HTTP ${status})`, cost);
        if (status === undefined || status >= 500 || status === 408) throw new ShopifyAdminError('unavailable', errors.message ?? `Shopify answered HTTP ${status}`, cost);
        const messages = graphQLErrors.map((e) => e.message).filter(Boolean);
        throw new ShopifyAdminError('refused', messages.length ? messages.join('; ') : (errors.message ?? `Shopify answered HTTP ${status}`), cost);
      }
      return { data: response.data as T, cost };
    },
  };
}

function costOf(extensions: Record<string, unknown> | undefined): CallCost | null {
  const cost = extensions?.cost as { requestedQueryCost?: number; actualQueryCost?: number | null; throttleStatus?: ThrottleStatus } | undefined;
  if (!cost || typeof cost.requestedQueryCost !== 'number') return null;
  return { requested: cost.requestedQueryCost, actual: cost.actualQueryCost ?? null, throttle: cost.throttleStatus ?? null };
}

/**
 * The client-credentials grant of an app made in Shopify's Dev Dashboard: an access token for the
 * app's granted scopes, good for `expires_in` seconds (24 hours).
 */
export async function clientCredentialsToken(
  urls: StoreUrls,
  shopDomain: string,
  clientId: string,
  clientSecret: string,
  timeoutMs = 15_000,
): Promise<{ accessToken: string; scopes: string[]; expiresInSeconds: number }> {
  let res: Response;
  try {
    res = await fetch(`${storeBase(urls, shopDomain)}/admin/oauth/access_token`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded', accept: 'application/json' },
      body: new URLSearchParams({ grant_type: 'client_credentials', client_id: clientId, client_secret: clientSecret }),
      signal: AbortSignal.timeout(timeoutMs),
    });
  } catch (err) {
    throw new ShopifyAdminError('unavailable', `Shopify did not answer: ${(err as Error).message}`);
  }
  const body = (await res.json().catch(() => null)) as { access_token?: string; scope?: string; expires_in?: number; error?: string; error_description?: string } | null;
  if (res.status >= 500 || res.status === 429) throw new ShopifyAdminError('unavailable', `Shopify answered HTTP ${res.status} to the client-credentials grant`);
  if (!res.ok || !body?.access_token) {
    const why = body?.error_description ?? body?.error ?? `HTTP ${res.status}`;
    throw new ShopifyAdminError('unauthorized', `Shopify refused the client id and secret: ${why}`);
  }
  return { accessToken: body.access_token, scopes: (body.scope ?? '').split(',').map((s) => s.trim()).filter(Boolean), expiresInSeconds: body.expires_in ?? 86_400 };
}
