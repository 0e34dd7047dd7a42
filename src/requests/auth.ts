import type { FastifyReply, FastifyRequest } from 'fastify';
import type { DB } from '../db/database.js';
import type { TokenHolder } from '../domain/customers/index.js';
import { type ApiKeyRef, authenticateApiKey, type Identity, type Shop } from '../domain/shops/index.js';
import type { StaffSession } from '../domain/staff/index.js';
import { UnauthorizedError } from './errors.js';

declare module 'fastify' {
  interface FastifyRequest {
    /** The shop whose API key authenticated this request; null when there was none or it was bad. */
    shop: Shop | null;
    /** The key that authenticated it (id and public prefix); null with `shop`, and on the storefront. */
    apiKey: ApiKeyRef | null;
    /** /storefront/graphql: the customer access token's holder (src/http/storefront-route.ts); unset elsewhere. */
    customer?: TokenHolder | null;
    /** /graphql: the staff session a cookie (with its CSRF token) authenticated (src/http/staff-session.ts); unset elsewhere. */
    staff?: StaffSession | null;
  }
}

/** The token of an `Authorization: Bearer <token>` header value, if that is what it is. */
export function bearerToken(header: unknown): string | null {
  if (typeof header !== 'string') return null;
  const match = /^Bearer\s+(\S+)\s*$/i.exec(header);
  return match ? match[1]! : null;
}

export async function identityFromAuthorization(db: DB, header: unknown): Promise<Identity | null> {
  const token = bearerToken(header);
  return token ? authenticateApiKey(db, token) : null;
}

/** onRequest hook: resolves `request.shop` and `request.apiKey`, leaving the decision to refuse to the route. */
export function resolveShop(db: DB) {
  return async (request: FastifyRequest) => {
    const identity = await identityFromAuthorization(db, request.headers.authorization);
    request.shop = identity?.shop ?? null;
    request.apiKey = identity?.apiKey ?? null;
  };
}

/**
 * onRequest hook for routes that need a shop: 401 with `WWW-Authenticate: Bearer` otherwise,
 * before the body is read (onRequest runs before parsing). The connection is closed after the
 * answer: the body it announced is never read, and waiting for it would hold the socket.
 * `otherDoor`, for a request without a key, may authenticate it another way (a staff session's
 * cookie on the downloads).
 */
export function requireShop(db: DB, otherDoor?: (request: FastifyRequest) => Promise<void>) {
  const resolve = resolveShop(db);
  return async (request: FastifyRequest, reply: FastifyReply) => {
    await resolve(request);
    if (!request.shop && request.headers.authorization === undefined && otherDoor) await otherDoor(request);
    if (!request.shop) {
      closeIfBodyUnread(request, reply);
      throw new UnauthorizedError();
    }
  };
}

/** Answers with `Connection: close` when the request announced a body we are not going to read. */
export function closeIfBodyUnread(request: FastifyRequest, reply: FastifyReply): void {
  const h = request.headers;
  if (h['transfer-encoding'] !== undefined || (h['content-length'] !== undefined && h['content-length'] !== '0')) {
    reply.header('connection', 'close');
  }
}
