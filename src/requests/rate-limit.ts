import type { FastifyReply, FastifyRequest } from 'fastify';
import { type RateLimiter, rateLimitHeaders, rateLimitMessage } from '../rate-limit/limiter.js';
import { restOperation } from '../rate-limit/operations.js';
import { HttpError } from './errors.js';

/**
 * onRequest hook, after authentication: counts the request against its shop's bucket for this
 * route (src/rate-limit/operations.ts), sets the RateLimit-* headers, and refuses with 429 and
 * Retry-After when the bucket is full. Unauthenticated requests are refused before they get here.
 */
export function rateLimitHook(limiter: RateLimiter, prefix: string) {
  return async (request: FastifyRequest, reply: FastifyReply) => {
    if (!request.shop) return;
    const url = request.routeOptions.url ?? '';
    const operation = restOperation(request.method, url.startsWith(prefix) ? url.slice(prefix.length) : url);
    const decision = await limiter.consume(request.shop.id, [operation]);
    const headers = rateLimitHeaders(decision);
    if (!decision.allowed) throw new HttpError(429, 'rate_limited', rateLimitMessage(decision), headers);
    reply.headers(headers);
  };
}
