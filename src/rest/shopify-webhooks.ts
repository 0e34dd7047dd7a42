import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import type { DB } from '../db/database.js';
import { parseInput, type SecretBox } from '../domain/kernel/index.js';
import { receiveShopifyWebhook } from '../domain/shopify/index.js';

export const SHOPIFY_WEBHOOKS_PATH = '/integrations/shopify/webhooks';

const headersSchema = z.object({
  'x-shopify-shop-domain': z.string().min(1).max(255),
  'x-shopify-topic': z.string().min(1).max(100),
  'x-shopify-webhook-id': z.string().min(1).max(255),
  'x-shopify-hmac-sha256': z.string().min(1).max(255),
  'x-shopify-triggered-at': z.iso.datetime({ offset: true }).optional(),
});

/**
 * POST /integrations/shopify/webhooks: the address a shop gives Shopify for its webhooks. No API
 * key: the HMAC of the raw body is the proof, so this plugin reads the body as bytes, exactly as
 * Shopify signed them. Shopify gets its 200 once the webhook is stored; it is applied after.
 */
export async function shopifyWebhookRoutes(app: FastifyInstance, opts: { db: DB; secrets: SecretBox }): Promise<void> {
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', { parseAs: 'buffer' }, (_request, body, done) => done(null, body));
  app.post(SHOPIFY_WEBHOOKS_PATH, async (request) => {
    const headers = parseInput(headersSchema, request.headers);
    const rawBody = Buffer.isBuffer(request.body) ? request.body : Buffer.alloc(0);
    const receipt = await receiveShopifyWebhook(opts.db, opts.secrets, {
      shopDomain: headers['x-shopify-shop-domain'],
      topic: headers['x-shopify-topic'],
      webhookId: headers['x-shopify-webhook-id'],
      hmac: headers['x-shopify-hmac-sha256'],
      triggeredAt: headers['x-shopify-triggered-at'] ? new Date(headers['x-shopify-triggered-at']) : null,
      rawBody,
    });
    const message = { accepted: 'Webhook stored; it is applied shortly', duplicate: 'Webhook already received', rejected: `Webhook stored as rejected: ${receipt.reason}` }[receipt.status];
    return { success: true, message, status: receipt.status, id: receipt.id };
  });
}
