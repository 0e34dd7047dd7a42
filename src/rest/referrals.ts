import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { DB } from '../db/database.js';
import { apiKeyActor } from '../domain/audit/index.js';
import { getReferralCode, pageReferees } from '../domain/rewards/index.js';

/** GET /referral (get or create the customer's code) and GET /referral/referee (who they referred). */
export function registerReferralRoutes(app: FastifyInstance, db: DB): void {
  app.get('/referral', async (request: FastifyRequest) => {
    const referralCode = await getReferralCode(db, request.shop!.id, request.query, apiKeyActor(request.apiKey!));
    return { success: true, message: 'Referral code retrieved', data: { referralCode } };
  });
  app.get('/referral/referee', async (request: FastifyRequest) => {
    const data = await pageReferees(db, request.shop!.id, request.query);
    return { success: true, message: 'Referees retrieved', data };
  });
}
