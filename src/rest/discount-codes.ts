import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { DB } from '../db/database.js';
import { checkDiscountCode } from '../domain/rewards/index.js';

/** POST /discountCodes/:code/check: what a code of the shop gives for a cart; reads only. */
export function registerDiscountCodeRoutes(app: FastifyInstance, db: DB): void {
  app.post('/discountCodes/:code/check', async (request: FastifyRequest<{ Params: { code: string } }>) => {
    const check = await checkDiscountCode(db, request.shop!.id, request.params.code, request.body, null);
    return { success: true, message: 'Discount code checked', check };
  });
}
