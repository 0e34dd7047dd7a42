import type { FastifyInstance } from 'fastify';
import type { DB } from '../db/database.js';
import { apiKeyActor } from '../domain/audit/index.js';
import { customerTierStatus, earningRuleEligibility, listEarningRules, reportAction } from '../domain/program/index.js';

/** GET /earningRules and /earningRules/eligibility (as BLOY has them), POST /actions (custom rules) and GET /vip/tiers/customer. */
export function registerEarningRuleRoutes(app: FastifyInstance, db: DB): void {
  app.get('/earningRules', async (request) => ({
    success: true,
    message: 'Earning rules retrieved',
    data: await listEarningRules(db, request.shop!.id),
  }));
  app.get('/earningRules/eligibility', async (request) => ({
    success: true,
    message: 'Earning rules, with isEarned for the customer',
    data: await earningRuleEligibility(db, request.shop!.id, request.query),
  }));
  app.get('/vip/tiers/customer', async (request) => ({
    success: true,
    message: 'Customer tier retrieved',
    data: await customerTierStatus(db, request.shop!.id, request.query),
  }));
  app.post('/actions', async (request, reply) => {
    const award = await reportAction(db, request.shop!.id, request.body, new Date(), apiKeyActor(request.apiKey!));
    reply.code(award.created ? 201 : 200);
    return {
      success: true,
      message: award.created ? 'Action rewarded' : 'Action already rewarded for this reference',
      created: award.created,
      points: award.points,
      activity: award.activity,
    };
  });
}
