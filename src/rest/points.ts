import type { FastifyInstance } from 'fastify';
import type { DB } from '../db/database.js';
import { changePoints, type PointsOperation } from '../domain/ledger/index.js';

/** POST /points/add, /points/substract (the contract's spelling, and /points/subtract), /points/update. */
export function registerPointsRoutes(app: FastifyInstance, db: DB): void {
  const route = (op: PointsOperation) => async (request: { shop: { id: string } | null; body: unknown }) => {
    const { activity } = await changePoints(db, request.shop!.id, op, request.body);
    return { success: true, activity };
  };
  app.post('/points/add', route('add'));
  app.post('/points/substract', route('subtract'));
  app.post('/points/subtract', route('subtract'));
  app.post('/points/update', route('set'));
}
