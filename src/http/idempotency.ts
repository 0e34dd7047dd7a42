import { createHash } from 'node:crypto';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { DB } from '../db/database.js';
import { ValidationError } from '../domain/errors.js';
import { claimIdempotencyKey, completeIdempotencyKey, releaseIdempotencyKey } from '../domain/idempotency.js';

declare module 'fastify' {
  interface FastifyRequest {
    idempotencyKey?: string;
  }
}

const KEY_PATTERN = /^[\x21-\x7e]{1,255}$/;

/**
 * `Idempotency-Key` on POST, REST and GraphQL alike (DESIGN.md "Idempotency"): the first request
 * with a key runs and its response is stored; a repeat with the same body gets that response
 * back (`Idempotent-Replayed: true`) and changes nothing; another body with the key is 422.
 */
export function idempotencyHooks(db: DB) {
  return {
    async preHandler(request: FastifyRequest, reply: FastifyReply) {
      const key = request.headers['idempotency-key'];
      if (request.method !== 'POST' || key === undefined || !request.shop) return;
      if (typeof key !== 'string' || !KEY_PATTERN.test(key)) {
        throw new ValidationError('Idempotency-Key must be 1 to 255 printable ASCII characters', [
          { path: 'Idempotency-Key', message: 'invalid header' },
        ]);
      }
      const fingerprint = createHash('sha256')
        .update(`${request.method} ${request.url}\n${JSON.stringify(request.body ?? null)}`)
        .digest('hex');
      const claim = await claimIdempotencyKey(db, request.shop.id, key, fingerprint);
      if (claim.kind === 'replay') {
        return reply
          .code(claim.response.status)
          .header('content-type', 'application/json; charset=utf-8')
          .header('idempotent-replayed', 'true')
          .send(claim.response.body);
      }
      request.idempotencyKey = key;
    },

    async onSend(request: FastifyRequest, reply: FastifyReply, payload: unknown) {
      const key = request.idempotencyKey;
      if (!key || !request.shop) return payload;
      request.idempotencyKey = undefined;
      const body = typeof payload === 'string' ? payload : Buffer.isBuffer(payload) ? payload.toString('utf8') : undefined;
      // Failures the client should retry leave the key free for that retry. So does a stream (an SSE
      // subscription): it cannot be stored, and opening it again changes nothing. And so does a
      // response carrying a secret (`no-store`: a new API key, a signing secret), which is never kept
      // in clear: a retry runs again and shows a new secret.
      const secret = String(reply.getHeader('cache-control') ?? '').includes('no-store');
      if (body === undefined || secret || reply.statusCode >= 500 || reply.statusCode === 429) {
        await releaseIdempotencyKey(db, request.shop.id, key);
      } else {
        await completeIdempotencyKey(db, request.shop.id, key, { status: reply.statusCode, body });
      }
      return payload;
    },
  };
}
