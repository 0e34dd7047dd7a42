import type { FastifyInstance } from 'fastify';
import type { DB } from '../db/database.js';
import { apiKeyActor } from '../domain/audit/index.js';
import { eraseCustomer, exportCustomerData } from '../domain/data-rights/index.js';

/** The REST twins of customerDataExport and customerErase (docs/data-rights.md). */
export function registerDataRightsRoutes(app: FastifyInstance, db: DB): void {
  app.get('/customers/data', async (request, reply) => {
    // A person's whole record: no cache may keep it.
    reply.header('cache-control', 'no-store');
    return { success: true, message: 'Customer data exported', data: await exportCustomerData(db, request.shop!.id, request.query) };
  });
  app.post('/customers/erase', async (request) => ({
    success: true,
    message: 'Customer erased',
    ...(await eraseCustomer(db, request.shop!.id, request.body, apiKeyActor(request.apiKey!))),
  }));
}
