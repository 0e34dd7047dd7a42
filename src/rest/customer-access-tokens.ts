import type { FastifyInstance } from 'fastify';
import type { DB } from '../db/database.js';
import { apiKeyActor } from '../domain/audit/index.js';
import { createCustomerAccessToken, revokeCustomerAccessTokens } from '../domain/customers/index.js';

/** The REST twins of customerAccessTokenCreate and customerAccessTokensRevoke, for the shop's backend. */
export function registerCustomerAccessTokenRoutes(app: FastifyInstance, db: DB): void {
  app.post('/customerAccessTokens', async (request, reply) => {
    const created = await createCustomerAccessToken(db, request.shop!.id, request.body);
    // The token is shown once: no cache may keep it.
    reply.code(201).header('cache-control', 'no-store');
    return { success: true, message: 'Customer access token created', ...created };
  });
  app.post('/customerAccessTokens/revoke', async (request) => ({
    success: true,
    message: 'Customer access tokens revoked',
    ...(await revokeCustomerAccessTokens(db, request.shop!.id, request.body, new Date(), apiKeyActor(request.apiKey!))),
  }));
}
