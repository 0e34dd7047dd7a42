import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { DB } from '../db/database.js';
import { pagePointsRedemptions, redeemPoints } from '../domain/rewards/index.js';

/** GET /pointsRedemptions (the options, flagged for a customer) and POST /pointsRedemptions (redeem). */
export function registerRedemptionRoutes(app: FastifyInstance, db: DB): void {
  app.get('/pointsRedemptions', async (request: FastifyRequest) => {
    const pointsRedemptions = await pagePointsRedemptions(db, request.shop!.id, request.query);
    return { success: true, message: 'Points redemptions retrieved', pointsRedemptions };
  });
  app.post('/pointsRedemptions', async (request: FastifyRequest) => {
    const { discountCode } = await redeemPoints(db, request.shop!.id, request.body);
    return { success: true, message: 'Points redeemed', discountCode: discountCode.code };
  });
}
