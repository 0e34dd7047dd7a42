import { createHash } from 'node:crypto';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { DB } from '../db/database.js';
import { DomainError, ValidationError } from '../domain/kernel/index.js';
import { claimIdempotencyKey, completeIdempotencyKey, releaseIdempotencyKey, type StoredResponse } from '../domain/ledger/index.js';
import { domainErrorStatus } from './errors.js';

declare module 'fastify' {
  interface FastifyRequest {
    idempotencyKey?: string;
  }
}

const KEY_PATTERN = /^[\x21-\x7e]{1,255}$/;

/**
 * What a repeat gets when the first response carried a secret: the key is spent (the request
 * ran), but the secret is never stored, so there is nothing to replay.
 */
const SECRET_WITHHELD = {
  status: 409,
  code: 'idempotency_response_withheld',
  message:
    'a request with this Idempotency-Key already ran; its response carried a secret (an API key or a webhook signing secret), ' +
    'which is never stored, so it cannot be replayed: list the keys or subscriptions to see what it created',
};

/** The face whose answers the idempotency layer words itself: the REST envelope, or a GraphQL response. */
export type IdempotencyFace = 'rest' | 'graphql';

function errorBody(face: IdempotencyFace, status: number, code: string, message: string): string {
  return JSON.stringify(
    face === 'rest' ? { success: false, statusCode: status, error: code, message } : { errors: [{ message, extensions: { code } }] },
  );
}

/** SHA-256 of the method, URL and body; a body too deep to serialise is a 400, as it is without the header. */
function fingerprint(request: FastifyRequest): string {
  let body: string;
  try {
    body = JSON.stringify(request.body ?? null);
  } catch (err) {
    if (!(err instanceof RangeError)) throw err;
    throw new ValidationError('the body is nested too deeply', [{ path: 'body', message: 'nested too deeply' }]);
  }
  return createHash('sha256').update(`${request.method} ${request.url}\n${body}`).digest('hex');
}

/**
 * `Idempotency-Key` on POST and PUT, REST and GraphQL alike (DESIGN.md "Idempotency"): the first request
 * with a key runs and its response is stored; a repeat with the same body gets that response
 * back (`Idempotent-Replayed: true`) and changes nothing; another body with the key is 422.
 * A key never runs a request twice, unless its first run failed in a way worth retrying.
 */
/** PUT too: a PUT of an order is the same state again, but a retried one should not even recompute. */
const KEYED_METHODS = new Set(['POST', 'PUT']);

export function idempotencyHooks(db: DB, face: IdempotencyFace = 'rest') {
  const send = (reply: FastifyReply, response: StoredResponse) =>
    reply.code(response.status).header('content-type', 'application/json; charset=utf-8').send(response.body);
  const withheld: StoredResponse = {
    status: SECRET_WITHHELD.status,
    body: errorBody(face, SECRET_WITHHELD.status, SECRET_WITHHELD.code, SECRET_WITHHELD.message),
  };

  const claim = async (request: FastifyRequest, reply: FastifyReply, shopId: string, key: string) => {
    if (typeof key !== 'string' || !KEY_PATTERN.test(key)) {
      throw new ValidationError('Idempotency-Key must be 1 to 255 printable ASCII characters', [
        { path: 'Idempotency-Key', message: 'invalid header' },
      ]);
    }
    // On the storefront a key is its customer's, and a signed-in person's is theirs: the same key from
    // two of them never replays one's answer to the other (a viewer would get what its role cannot read).
    const owned = request.customer ? `customer/${request.customer.customerId}/${key}` : request.staff ? `staff/${request.staff.staffId}/${key}` : key;
    const claimed = await claimIdempotencyKey(db, shopId, owned, fingerprint(request));
    if (claimed.kind === 'replay') return send(reply.header('idempotent-replayed', 'true'), claimed.response);
    request.idempotencyKey = owned;
  };

  return {
    async preHandler(request: FastifyRequest, reply: FastifyReply) {
      const key = request.headers['idempotency-key'];
      if (!KEYED_METHODS.has(request.method) || key === undefined || !request.shop) return;
      try {
        return await claim(request, reply, request.shop.id, key as string);
      } catch (err) {
        // REST's error handler words these; on /graphql they are answered as GraphQL errors.
        if (face === 'rest' || !(err instanceof DomainError)) throw err;
        const status = domainErrorStatus(err);
        return send(reply, { status, body: errorBody(face, status, err.code, err.message) });
      }
    },

    async onSend(request: FastifyRequest, reply: FastifyReply, payload: unknown) {
      const key = request.idempotencyKey;
      if (!key || !request.shop) return payload;
      request.idempotencyKey = undefined;
      const body = typeof payload === 'string' ? payload : Buffer.isBuffer(payload) ? payload.toString('utf8') : undefined;
      // Failures the client should retry leave the key free for that retry. So does a stream (an SSE
      // subscription): it cannot be stored, and opening it again changes nothing.
      if (body === undefined || reply.statusCode >= 500 || reply.statusCode === 429) {
        await releaseIdempotencyKey(db, request.shop.id, key);
        return payload;
      }
      // A response carrying a secret (`no-store`: a new API key, a signing secret) is never kept in
      // clear; what ran is kept all the same, so a repeat runs nothing (the operation may have done
      // more than make the secret: another mutation in the same GraphQL document).
      const secret = String(reply.getHeader('cache-control') ?? '').includes('no-store');
      await completeIdempotencyKey(db, request.shop.id, key, secret ? withheld : { status: reply.statusCode, body });
      return payload;
    },
  };
}
