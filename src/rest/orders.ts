import type { FastifyInstance } from 'fastify';
import type { DB } from '../db/database.js';
import { getOrder, upsertOrder } from '../domain/orders/index.js';

type WithOrderId = { Params: { orderId: string } };

/** PUT /orders/:orderId (the order's full state, LoyaltyLion's model) and GET /orders/:orderId. */
export function registerOrderRoutes(app: FastifyInstance, db: DB): void {
  app.put<WithOrderId>('/orders/:orderId', async (request, reply) => {
    const { order, created, changed } = await upsertOrder(db, request.shop!.id, request.params.orderId, request.body);
    reply.code(created ? 201 : 200);
    return { success: true, message: created ? 'Order recorded' : changed ? 'Order updated' : 'Order unchanged', order };
  });
  app.get<WithOrderId>('/orders/:orderId', async (request) => ({
    success: true,
    message: 'Order retrieved',
    order: await getOrder(db, request.shop!.id, request.params.orderId),
  }));
}
