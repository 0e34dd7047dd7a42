import type { FastifyReply, FastifyRequest } from 'fastify';
import type { DB } from '../db/database.js';
import { authenticateApiKey, type Shop } from '../domain/shops.js';
import { UnauthorizedError } from './errors.js';

declare module 'fastify' {
  interface FastifyRequest {
    /** The shop whose API key authenticated this request; null when there was none or it was bad. */
    shop: Shop | null;
  }
}

/** The token of an `Authorization: Bearer <token>` header value, if that is what it is. */
export function bearerToken(header: unknown): string | null {
  if (typeof header !== 'string') return null;
  const match = /^Bearer\s+(\S+)\s*$/i.exec(header);
  return match ? match[1]! : null;
}

export async function shopFromAuthorization(db: DB, header: unknown): Promise<Shop | null> {
  const token = bearerToken(header);
  return token ? authenticateApiKey(db, token) : null;
}

/** onRequest hook: resolves `request.shop`, leaving the decision to refuse to the route. */
export function resolveShop(db: DB) {
  return async (request: FastifyRequest) => {
    request.shop = await shopFromAuthorization(db, request.headers.authorization);
  };
}

/** onRequest hook for routes that need a shop: 401 with `WWW-Authenticate: Bearer` otherwise. */
export function requireShop(db: DB) {
  const resolve = resolveShop(db);
  return async (request: FastifyRequest, _reply: FastifyReply) => {
    await resolve(request);
    if (!request.shop) throw new UnauthorizedError();
  };
}
