import type { FastifyInstance } from 'fastify';
import type { DB } from '../db/database.js';
import { requireShop } from '../http/auth.js';
import { idempotencyHooks } from '../http/idempotency.js';
import { registerPointsRoutes } from './points.js';

export const REST_PREFIX = '/rest-api/v1';

/** The REST contract's routes: thin adapters that parse, call the domain and shape the response. */
export async function restApi(app: FastifyInstance, opts: { db: DB }): Promise<void> {
  const idempotency = idempotencyHooks(opts.db);
  app.addHook('onRequest', requireShop(opts.db));
  app.addHook('preHandler', idempotency.preHandler);
  app.addHook('onSend', idempotency.onSend);
  registerPointsRoutes(app, opts.db);
}
