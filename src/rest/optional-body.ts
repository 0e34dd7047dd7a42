import type { FastifyRequest } from 'fastify';

/**
 * For routes whose body is optional: an empty body is no body, even when a client labels it
 * application/json (Fastify would refuse that as malformed JSON).
 */
export async function emptyBodyIsNoBody(request: FastifyRequest): Promise<void> {
  const { headers } = request;
  if (headers['transfer-encoding'] === undefined && (headers['content-length'] ?? '0') === '0') {
    delete headers['content-type'];
  }
}
