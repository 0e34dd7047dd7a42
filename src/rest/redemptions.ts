import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { DB } from '../db/database.js';
import { apiKeyActor } from '../domain/audit/index.js';
import { cancelDiscountCode } from '../domain/codes/index.js';
import { pagePointsRedemptions, redeemPoints } from '../domain/rewards/index.js';
import { emptyBodyIsNoBody } from './optional-body.js';

type WithCode = { Params: { code: string } };

/** GET /pointsRedemptions (the options, flagged for a customer), POST /pointsRedemptions (redeem) and the cancellation of a code. */
export function registerRedemptionRoutes(app: FastifyInstance, db: DB): void {
  app.get('/pointsRedemptions', async (request: FastifyRequest) => {
    const pointsRedemptions = await pagePointsRedemptions(db, request.shop!.id, request.query);
    return { success: true, message: 'Points redemptions retrieved', pointsRedemptions };
  });
  app.post('/pointsRedemptions', async (request: FastifyRequest) => {
    const { discountCode } = await redeemPoints(db, request.shop!.id, request.body);
    return { success: true, message: 'Points redeemed', discountCode: discountCode.code };
  });
  app.post<WithCode>('/pointsRedemptions/:code/cancel', { onRequest: emptyBodyIsNoBody }, async (request) => {
    const { discountCode, activity } = await cancelDiscountCode(db, request.shop!.id, request.params.code, request.body, apiKeyActor(request.apiKey!));
    return { success: true, message: activity ? 'Discount code cancelled; its points were returned' : 'Discount code cancelled', discountCode, activity };
  });
}
