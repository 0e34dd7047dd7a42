import type { FastifyInstance } from 'fastify';
import type { DB } from '../db/database.js';
import { listEarningRules } from '../domain/earning-rules.js';

/** GET /earningRules: the shop's rules, as BLOY lists them (`data`). */
export function registerEarningRuleRoutes(app: FastifyInstance, db: DB): void {
  app.get('/earningRules', async (request) => ({
    success: true,
    message: 'Earning rules retrieved',
    data: await listEarningRules(db, request.shop!.id),
  }));
}
