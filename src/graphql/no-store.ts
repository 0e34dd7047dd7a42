import type { GraphQLContext, ServerContext } from './builder.js';

/**
 * Marks the HTTP response as carrying a secret (a new API key, a webhook signing secret):
 * `Cache-Control: no-store`, which also keeps the idempotency layer from storing it.
 * Over graphql-ws there is no HTTP response to mark.
 */
export function markResponseSecret(ctx: GraphQLContext): void {
  (ctx as GraphQLContext & Partial<ServerContext>).reply?.header('cache-control', 'no-store');
}
