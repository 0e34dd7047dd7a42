import { createHmac, randomUUID } from 'node:crypto';
import { SHOPIFY_WEBHOOKS_PATH } from '../../src/rest/shopify-webhooks.js';

export type ShopifyDeliveryOptions = { webhookId?: string; secret?: string; hmac?: string; triggeredAt?: Date };

/**
 * Delivers a webhook as Shopify does: the raw body, its HMAC with the shop's secret, the shop's
 * domain, a webhook id. `body` as text is sent as is (ids past 2^53 as JSON numbers, as Shopify
 * sends them; see shopifyJson), anything else as JSON.stringify writes it.
 */
export function deliverShopifyWebhook(baseUrl: string, shopDomain: string, topic: string, body: unknown, options: ShopifyDeliveryOptions & { secret: string }) {
  const raw = typeof body === 'string' ? body : JSON.stringify(body);
  const hmac = options.hmac ?? createHmac('sha256', options.secret).update(raw).digest('base64');
  return fetch(`${baseUrl}${SHOPIFY_WEBHOOKS_PATH}`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      'x-shopify-topic': topic,
      'x-shopify-hmac-sha256': hmac,
      'x-shopify-shop-domain': shopDomain,
      'x-shopify-webhook-id': options.webhookId ?? randomUUID(),
      'x-shopify-api-version': '2025-10',
      'x-shopify-triggered-at': (options.triggeredAt ?? new Date()).toISOString(),
    },
    body: raw,
  });
}

/** JSON text with every bigint written as a JSON number, as Shopify writes ids past 2^53. */
export function shopifyJson(value: unknown): string {
  return JSON.stringify(value, (_key, v: unknown) => (typeof v === 'bigint' ? `\u0000big:${v}` : v)).replace(/"\\u0000big:(\d+)"/g, '$1');
}
