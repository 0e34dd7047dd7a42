import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { DB } from '../db/database.js';
import { requireShop } from '../requests/auth.js';
import { idempotencyHooks } from '../requests/idempotency.js';
import { rateLimitHook } from '../requests/rate-limit.js';
import type { WebhookSubscriptionDeps } from '../domain/webhooks/index.js';
import type { RateLimiter } from '../rate-limit/limiter.js';
import { registerCustomerAccessTokenRoutes } from './customer-access-tokens.js';
import { registerDataRightsRoutes } from './data-rights.js';
import { registerDiscountCodeRoutes } from './discount-codes.js';
import { registerEarningRuleRoutes } from './earning-rules.js';
import { registerExportRoutes, SESSION_DOWNLOADS } from './exports.js';
import { registerOrderRoutes } from './orders.js';
import { registerPointsRoutes } from './points.js';
import { registerRedemptionRoutes } from './redemptions.js';
import { registerReferralRoutes } from './referrals.js';
import { registerWebhookRoutes } from './webhooks.js';

export const REST_PREFIX = '/rest-api/v1';
/** The downloads a staff session's cookie opens (src/http/staff-session.ts), as the router names them. */
export const REST_SESSION_DOWNLOADS = SESSION_DOWNLOADS.map((path) => `${REST_PREFIX}${path}`);

/** The REST contract's routes: thin adapters that parse, call the domain and shape the response. */
export async function restApi(
  app: FastifyInstance,
  opts: { db: DB; rateLimiter: RateLimiter; webhooks: WebhookSubscriptionDeps; sessionDownloads: (request: FastifyRequest) => Promise<void> },
): Promise<void> {
  const idempotency = idempotencyHooks(opts.db);
  app.addHook('onRequest', requireShop(opts.db, opts.sessionDownloads));
  app.addHook('onRequest', rateLimitHook(opts.rateLimiter, REST_PREFIX));
  app.addHook('preHandler', idempotency.preHandler);
  app.addHook('onSend', idempotency.onSend);
  registerPointsRoutes(app, opts.db);
  registerRedemptionRoutes(app, opts.db);
  registerDiscountCodeRoutes(app, opts.db);
  registerReferralRoutes(app, opts.db);
  registerWebhookRoutes(app, opts.webhooks);
  registerOrderRoutes(app, opts.db);
  registerEarningRuleRoutes(app, opts.db);
  registerCustomerAccessTokenRoutes(app, opts.db);
  registerDataRightsRoutes(app, opts.db);
  registerExportRoutes(app, opts.db);
}
