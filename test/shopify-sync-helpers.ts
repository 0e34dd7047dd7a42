import { randomBytes } from 'node:crypto';
import { expect } from 'vitest';
import type { DB } from '../src/db/database.js';
import { REQUIRED_SCOPES } from '../src/domain/shopify/index.js';
import type { ShopifyAdminStandIn, StoreOptions } from './support/shopify-admin.js';

/**
 * A shop connected to a store of the Admin API stand-in, over HTTP only, so the same steps serve
 * an in-process test app and real server processes (test/reliability): its Shopify domain set, a
 * reward to redeem, its Admin API connected with a token the store knows.
 */
export type SyncShop = { apiKey: string; shopId: string; domain: string; rewardId: string };

async function graphql(baseUrl: string, apiKey: string, query: string, variables: Record<string, unknown> = {}) {
  const res = await fetch(`${baseUrl}/graphql`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${apiKey}` },
    body: JSON.stringify({ query, variables }),
  });
  const body = (await res.json()) as { data?: any; errors?: unknown };
  expect(body.errors).toBeUndefined();
  return body.data;
}

export async function connectedShop(
  baseUrl: string,
  shopify: ShopifyAdminStandIn,
  shop: { shopId: string; apiKey: string },
  name: string,
  store: StoreOptions = {},
): Promise<SyncShop> {
  const domain = `${name}-${randomBytes(3).toString('hex')}.myshopify.com`;
  const settings = await graphql(baseUrl, shop.apiKey, 'mutation($i: ShopifySettingsInput!) { shopifySettingsUpdate(input: $i) { userErrors { code } } }', {
    i: { shopDomain: domain, webhookSecret: 'shpss_test_secret_123' },
  });
  expect(settings.shopifySettingsUpdate.userErrors).toEqual([]);
  const created = await graphql(baseUrl, shop.apiKey, 'mutation($input: PointsRedemptionInput!) { pointsRedemptionCreate(input: $input) { pointsRedemption { _id } userErrors { code } } }', {
    input: { name: '$5 off', type: 'amount', discountPrefix: 'SYNC-', rewardValue: 100, discountValue: 5 },
  });
  expect(created.pointsRedemptionCreate.userErrors).toEqual([]);
  const token = shopify.store(domain, store).addAccessToken([...REQUIRED_SCOPES]);
  const connected = await graphql(baseUrl, shop.apiKey, 'mutation($input: ShopifyAdminConnectInput!) { shopifyAdminConnect(input: $input) { userErrors { code message } } }', {
    input: { accessToken: token },
  });
  expect(connected.shopifyAdminConnect.userErrors).toEqual([]);
  return { ...shop, domain, rewardId: created.pointsRedemptionCreate.pointsRedemption._id };
}

/** Redeems the reward for `customer`; the code's text, or null when the server did not answer 200. */
export async function redeemCode(baseUrl: string, shop: SyncShop, customer: string): Promise<string | null> {
  try {
    const res = await fetch(`${baseUrl}/rest-api/v1/pointsRedemptions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${shop.apiKey}` },
      body: JSON.stringify({ customerIdentifier: customer, rewardId: shop.rewardId, pointsAmount: 100 }),
    });
    if (res.status !== 200) return null;
    return ((await res.json()) as { discountCode: string }).discountCode;
  } catch {
    return null;
  }
}

/** The shop's codes' Shopify state, by code. */
export async function syncStates(db: DB, shopId: string): Promise<Map<string, { sync: string | null; shopifyId: string | null }>> {
  const rows = await db.selectFrom('discount_codes').select(['code', 'shopify_sync', 'shopify_id']).where('shop_id', '=', shopId).execute();
  return new Map(rows.map((r) => [r.code, { sync: r.shopify_sync, shopifyId: r.shopify_id }]));
}

/** How many times the store created each code (successful creations only). */
export function creationsByCode(shopify: ShopifyAdminStandIn, domain: string): Map<string, number> {
  const counts = new Map<string, number>();
  for (const call of shopify.store(domain).callsTo('discountCodeBasicCreate')) {
    if (!(call.response as any)?.data?.discountCodeBasicCreate?.codeDiscountNode) continue;
    const code = (call.variables as { discount: { code: string } }).discount.code;
    counts.set(code, (counts.get(code) ?? 0) + 1);
  }
  return counts;
}

/** THROTTLED answers the store gave (HTTP 200 with the GraphQL error), and its HTTP 429s. */
export function throttledAnswers(shopify: ShopifyAdminStandIn, domain: string): { throttled: number; http429: number } {
  // The codes' calls: a catalogue page (652 points) cannot fit the tests' tiny buckets at all, which no real store's is.
  const calls = shopify.store(domain).calls.filter((c) => c.status === 429 || (c.rootFields ?? []).some((f) => f.startsWith('discountCode') || f === 'codeDiscountNodeByCode'));
  return {
    throttled: calls.filter((c) => c.status === 200 && ((c.response as any)?.errors ?? []).some?.((e: any) => e.extensions?.code === 'THROTTLED')).length,
    http429: calls.filter((c) => c.status === 429).length,
  };
}
