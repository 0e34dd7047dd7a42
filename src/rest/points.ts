import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { DB } from '../db/database.js';
import { apiKeyActor } from '../domain/audit/index.js';
import { changePoints, type PointsOperation } from '../domain/ledger/index.js';

/** POST /points/add, /points/substract (the contract's spelling, and /points/subtract), /points/update. */
export function registerPointsRoutes(app: FastifyInstance, db: DB): void {
  const route = (op: PointsOperation) => async (request: FastifyRequest) => {
    // REST is key-only: the key is the change's actor in the audit log.
    const { activity } = await changePoints(db, request.shop!.id, op, request.body, apiKeyActor(request.apiKey!));
    return { success: true, activity };
  };
  app.post('/points/add', route('add'));
  app.post('/points/substract', route('subtract'));
  app.post('/points/subtract', route('subtract'));
  app.post('/points/update', route('set'));
}
