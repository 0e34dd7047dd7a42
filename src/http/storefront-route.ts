import type { IncomingMessage } from 'node:http';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { DB } from '../db/database.js';
import { authenticateCustomerToken, isStorefrontOrigin } from '../domain/customers/index.js';
import { singleResultMediaType } from '../graphql/request-checks.js';
import { type createGraphQLServer, STOREFRONT_ENDPOINT, unauthenticatedError } from '../graphql/yoga.js';
import type { StorefrontLimiter } from '../rate-limit/storefront.js';
import { bearerToken, closeIfBodyUnread } from '../requests/auth.js';
import { idempotencyHooks } from '../requests/idempotency.js';
import { graphqlHandler } from './graphql-route.js';

/** How long a browser may keep a preflight's answer. */
const PREFLIGHT_MAX_AGE_SECONDS = 600;

/**
 * /storefront/graphql over HTTP (POST, GET, SSE), for pages in the browser (DESIGN.md "Storefront
 * access"). Before anything runs, in this order:
 * 1. the client IP's limit (so guessing tokens is as slow as using one): 429 with Retry-After;
 * 2. a CORS preflight (no token in it) passes for an origin some shop lists in `storefrontOrigins`,
 *    else 403 without CORS headers, which the browser reports as a CORS failure;
 * 3. the customer access token: missing, malformed, forged, expired, revoked, or the shop's API key: 401;
 * 4. a request with an Origin must come from one of the token's shop's origins: else 403.
 * Answers carry `Access-Control-Allow-Origin` only for an allowed origin. Errors are GraphQL's shape.
 */
export function registerStorefront(app: FastifyInstance, deps: { db: DB; yoga: ReturnType<typeof createGraphQLServer>; limiter: StorefrontLimiter }) {
  const { db, limiter } = deps;
  const idempotency = idempotencyHooks(db, 'graphql');

  const refuse = (request: FastifyRequest, reply: FastifyReply, status: number, code: string, message: string, headers: Record<string, string> = {}) => {
    closeIfBodyUnread(request, reply);
    const mediaType = singleResultMediaType(request.headers.accept) ?? 'application/json';
    return reply
      .code(status)
      .headers(headers)
      .header('content-type', `${mediaType}; charset=utf-8`)
      .send(JSON.stringify({ errors: [{ message, extensions: { code } }] }));
  };
  // A refusal the page itself should be able to read (an expired token, a limit) carries CORS headers when some shop allows its origin.
  const readableBy = async (origin: string | undefined): Promise<Record<string, string>> =>
    origin !== undefined && (await isStorefrontOrigin(db, origin)) ? corsHeaders(origin) : { vary: 'Origin' };

  const door = async (request: FastifyRequest, reply: FastifyReply) => {
    const origin = request.headers.origin;
    const ip = await limiter.consumeIp(request.ip);
    if (!ip.allowed) {
      return refuse(request, reply, 429, 'rate_limited', ip.message, { ...(await readableBy(origin)), 'retry-after': String(ip.retryAfterSec) });
    }
    if (request.method === 'OPTIONS') {
      if (origin !== undefined && (await isStorefrontOrigin(db, origin))) {
        return reply
          .code(204)
          .headers({
            ...corsHeaders(origin),
            'access-control-allow-methods': 'GET, POST, OPTIONS',
            'access-control-allow-headers': 'authorization, content-type, accept, idempotency-key',
            'access-control-max-age': String(PREFLIGHT_MAX_AGE_SECONDS),
          })
          .send();
      }
      return refuse(request, reply, 403, 'origin_not_allowed', `no shop lets pages of ${origin ?? 'no origin'} call the storefront (shop setting storefrontOrigins)`, { vary: 'Origin' });
    }
    const token = bearerToken(request.headers.authorization);
    const identity = token ? await authenticateCustomerToken(db, token) : null;
    if (!identity) {
      return refuse(request, reply, 401, 'unauthorized', unauthenticatedError('storefront').message, { ...(await readableBy(origin)), 'www-authenticate': 'Bearer' });
    }
    if (origin !== undefined) {
      if (!identity.storefrontOrigins.includes(origin)) {
        return refuse(request, reply, 403, 'origin_not_allowed', `this shop does not let pages of ${origin} call the storefront (shop setting storefrontOrigins)`, { vary: 'Origin' });
      }
      reply.headers(corsHeaders(origin));
    }
    request.shop = identity.shop;
    request.apiKey = null;
    request.customer = identity.holder;
  };

  app.route({
    url: STOREFRONT_ENDPOINT,
    method: ['GET', 'POST', 'OPTIONS'],
    onRequest: door,
    preHandler: idempotency.preHandler,
    onSend: idempotency.onSend,
    handler: graphqlHandler(deps.yoga),
  });
}

function corsHeaders(origin: string): Record<string, string> {
  return {
    'access-control-allow-origin': origin,
    'access-control-expose-headers': 'retry-after, idempotent-replayed',
    vary: 'Origin',
  };
}

/**
 * The storefront's graphql-ws credential check (src/http/websocket.ts), as the HTTP door does it:
 * the client IP's limit, the token, and the page's Origin (browsers send it with the upgrade and
 * CORS does not guard WebSockets, so it is checked here). Null refuses the connection (4403).
 */
export function storefrontSocketIdentity(db: DB, limiter: StorefrontLimiter) {
  return async (authorization: unknown, request: IncomingMessage) => {
    if (!(await limiter.consumeIp(request.socket.remoteAddress ?? 'unknown')).allowed) return null;
    const token = bearerToken(authorization);
    const identity = token ? await authenticateCustomerToken(db, token) : null;
    if (!identity) return null;
    const origin = request.headers.origin;
    if (origin !== undefined && !identity.storefrontOrigins.includes(origin)) return null;
    return { shop: identity.shop, apiKey: null, customer: identity.holder };
  };
}
