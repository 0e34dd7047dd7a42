import { randomUUID } from 'node:crypto';
import Fastify, { type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import { type DB, isDatabaseReachable } from '../db/database.js';
import { announceEndedTokens, forgetCustomerTokens } from '../domain/customers/index.js';
import type { MailDeps } from '../domain/mail/index.js';
import { forgetApiKey } from '../domain/shops/index.js';
import type { WebhookSubscriptionDeps } from '../domain/webhooks/index.js';
import type { EventBus } from '../events/bus.js';
import type { ShopifyAdmin } from '../shopify-admin/connect.js';
import { watchRevocations } from '../events/revocation-watch.js';
import { createGraphQLServer } from '../graphql/yoga.js';
import type { Logger } from '../logger.js';
import type { RateLimiter } from '../rate-limit/limiter.js';
import type { StaffLimiter } from '../rate-limit/staff.js';
import type { StorefrontLimiter } from '../rate-limit/storefront.js';
import { identityFromAuthorization } from '../requests/auth.js';
import { HttpError, toErrorResponse } from '../requests/errors.js';
import { idempotencyHooks } from '../requests/idempotency.js';
import { REST_PREFIX, REST_SESSION_DOWNLOADS, restApi } from '../rest/index.js';
import { shopifyWebhookRoutes } from '../rest/shopify-webhooks.js';
import { registerAdminPage } from './admin-page.js';
import { registerDashboard } from './dashboard.js';
import { registerApiDocs } from './docs.js';
import { answerClientError, answerFrameworkError } from './framework-errors.js';
import { registerGraphiQL, sendGraphiQL, wantsGraphiQL } from './graphiql.js';
import { graphqlHandler, requireShopForGraphQL } from './graphql-route.js';
import { mailUnsubscribeRoutes } from './mail-unsubscribe.js';
import { type Metrics, registerMetrics } from './metrics.js';
import { registerStorefront, storefrontSocketIdentity } from './storefront-route.js';
import { registerStaffSession, staffDoor, staffDownloadDoor, staffSocketDoor } from './staff-session.js';
import { attachGraphQLWebSocket } from './websocket.js';

export const BODY_LIMIT = 1024 * 1024;
const METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'] as const;
const REQUEST_ID = /^[\w.:-]{1,128}$/;

/**
 * The one HTTP server: REST under /rest-api/v1, GraphQL at /graphql (the shop's key; GraphiQL for a
 * browser) and /storefront/graphql (a customer's token), the pages, health probes.
 * Fastify gives us schema-less JSON parsing with a body limit, encapsulated hooks for auth and
 * idempotency, request ids and pino logging, and a graceful close that drains in-flight requests.
 */
export async function createHttpServer(deps: {
  db: DB;
  logger: Logger;
  rateLimiter: RateLimiter;
  storefrontLimiter: StorefrontLimiter;
  staffLimiter: StaffLimiter;
  webhooks: WebhookSubscriptionDeps;
  bus: EventBus;
  shopifyAdmin: ShopifyAdmin;
  mail: MailDeps;
  metrics: Metrics;
  /** How long a request may take to arrive, headers and body (REQUEST_TIMEOUT_MS). */
  requestTimeoutMs: number;
  /** PUBLIC_URL: staff links point there, and the session cookie is Secure when it is https. */
  publicUrl: string | null;
  /** The clock of staff sessions and links. */
  now: () => Date;
  /** SHOP_DELETION_GRACE_DAYS, for shopDeletionRequest. */
  shopDeletionGraceDays: number;
}): Promise<FastifyInstance> {
  const { db, logger, rateLimiter, storefrontLimiter, webhooks, bus, shopifyAdmin, requestTimeoutMs } = deps;
  const app = Fastify({
    loggerInstance: logger as FastifyBaseLogger,
    bodyLimit: BODY_LIMIT,
    requestIdHeader: false,
    genReqId: (req) => {
      const given = req.headers['x-request-id'];
      return typeof given === 'string' && REQUEST_ID.test(given) ? given : randomUUID();
    },
    return503OnClosing: true,
    // Node answers a request still arriving after this with 408 (answerClientError) and closes its
    // connection; Fastify's default, 0, let a client that never sends its announced body hold a
    // socket forever. Node checks every connectionsCheckingInterval: at most a second late.
    requestTimeout: requestTimeoutMs,
    http: { headersTimeout: requestTimeoutMs, connectionsCheckingInterval: Math.min(1_000, requestTimeoutMs) },
    forceCloseConnections: 'idle',
    routerOptions: { ignoreTrailingSlash: true },
    // Requests Fastify or Node refuse before routing still get the JSON error envelope.
    frameworkErrors: answerFrameworkError,
    clientErrorHandler: answerClientError,
  });

  // JSON only: a text/plain (or any other) body is refused as a wrong content type.
  app.removeContentTypeParser('text/plain');

  app.addHook('onSend', async (request, reply, payload) => {
    reply.header('x-request-id', request.id);
    return payload;
  });
  registerMetrics(app, deps.metrics);

  app.setErrorHandler((err, request, reply) => {
    const { body, headers, internal } = toErrorResponse(err);
    if (internal) request.log.error({ err }, 'request failed');
    return reply.code(body.statusCode).headers(headers).send(body);
  });

  app.setNotFoundHandler((request, reply) => {
    const { body } = toErrorResponse(new HttpError(404, 'not_found', `no route ${request.method} ${request.url.split('?')[0]}`));
    return reply.code(404).send(body);
  });

  // A known path with a method it does not serve is 405 with Allow, not 404.
  const routes = new Map<string, Set<string>>();
  app.addHook('onRoute', (route) => {
    const methods = routes.get(route.url) ?? new Set<string>();
    for (const m of [route.method].flat()) methods.add(m);
    routes.set(route.url, methods);
  });

  app.get('/healthz', async () => ({ success: true, status: 'alive' }));
  app.get('/readyz', async (_request, reply) => {
    const ready = await isDatabaseReachable(db);
    return reply.code(ready ? 200 : 503).send(
      ready
        ? { success: true, status: 'ready' }
        : { success: false, statusCode: 503, error: 'not_ready', message: 'the database is unreachable' },
    );
  });

  const staff = { db, limiter: deps.staffLimiter, now: deps.now, publicUrl: deps.publicUrl };
  await app.register(restApi, { prefix: REST_PREFIX, db, rateLimiter, webhooks, sessionDownloads: staffDownloadDoor(staff, REST_SESSION_DOWNLOADS) });
  await app.register(shopifyWebhookRoutes, { db, secrets: webhooks.secrets });

  // A key or tokens revoked on any instance are forgotten here at once, not after their cache's TTL;
  // tokens ended here, by a request or by due work, are announced to the other instances.
  bus.onRevoked((revocation) => ('apiKey' in revocation ? forgetApiKey(db, revocation.apiKey.prefix) : forgetCustomerTokens(db, revocation.customerTokens)));
  announceEndedTokens(db, (customerTokens) => void bus.announceRevocation({ customerTokens }));
  const services = { rateLimiter, storefrontLimiter, webhooks, bus, shopifyAdmin, mail: deps.mail, publicUrl: deps.publicUrl, now: deps.now, shopDeletionGraceDays: deps.shopDeletionGraceDays };
  const yoga = createGraphQLServer(db, logger, services, 'admin');
  const storefrontYoga = createGraphQLServer(db, logger, services, 'storefront');
  const staffSocket = staffSocketDoor(staff);
  const webSockets = attachGraphQLWebSocket(
    app.server,
    [
      {
        yoga,
        // A key in connectionParams is the caller, whatever cookie the upgrade carries; without one, a person's session may be.
        authenticate: (authorization, request) => (authorization === undefined ? staffSocket(request) : identityFromAuthorization(db, authorization)),
        acquireSlot: (identity) => bus.socketSlots.acquire(identity.shop.id),
      },
      {
        yoga: storefrontYoga,
        authenticate: storefrontSocketIdentity(db, storefrontLimiter),
        acquireSlot: async (identity) => (identity.customer ? bus.storefrontSocketSlots.acquire(identity.shop.id, identity.customer.customerId) : null),
      },
    ],
    bus,
  );
  const stopWatchingRevocations = watchRevocations({
    db,
    bus,
    logger,
    keysInUse: () => [...bus.keysInUse(), ...webSockets.keysInUse()],
    sessions: { inUse: webSockets.sessionsInUse, ended: webSockets.closeSessions, now: deps.now },
  });
  // Live subscriptions end before the drain: sockets close with 1001 (clients resubscribe
  // elsewhere), then the bus ends SSE streams, which would otherwise hold the close forever.
  app.addHook('preClose', async () => {
    stopWatchingRevocations();
    await webSockets.close();
    await bus.close();
  });
  registerDashboard(app);
  registerAdminPage(app);
  registerApiDocs(app);
  registerGraphiQL(app);
  registerStaffSession(app, staff);
  const idempotency = idempotencyHooks(db, 'graphql');
  const graphql = graphqlHandler(yoga);
  app.route({
    url: '/graphql',
    method: ['GET', 'POST', 'OPTIONS'],
    onRequest: requireShopForGraphQL(db, staffDoor(staff)),
    preHandler: idempotency.preHandler,
    onSend: idempotency.onSend,
    handler: (request, reply) => (wantsGraphiQL(request) ? sendGraphiQL(request, reply) : graphql(request, reply)),
  });
  registerStorefront(app, { db, yoga: storefrontYoga, limiter: storefrontLimiter });
  await app.register(mailUnsubscribeRoutes, { db, tokenKey: deps.mail.tokenKey, now: deps.now });

  for (const [url, served] of routes) {
    const others = METHODS.filter((m) => !served.has(m));
    if (others.length === 0) continue;
    const allow = [...served].join(', ');
    app.route({
      url,
      method: others,
      handler: async (request, reply) => {
        const { body } = toErrorResponse(new HttpError(405, 'method_not_allowed', `${request.method} is not allowed here; use ${allow}`));
        return reply.code(405).header('allow', allow).send(body);
      },
    });
  }

  return app;
}
