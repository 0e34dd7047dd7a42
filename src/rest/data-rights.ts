import type { FastifyInstance } from 'fastify';
import type { DB } from '../db/database.js';
import { apiKeyActor } from '../domain/audit/index.js';
import { eraseCustomer, exportCustomerData, getComplianceRequest, listComplianceRequests } from '../domain/data-rights/index.js';
import { nextCursor } from '../domain/kernel/index.js';

/** The REST twins of customerDataExport and customerErase, and Shopify's compliance requests as answered (docs/data-rights.md). */
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
  app.get('/complianceRequests', async (request, reply) => {
    reply.header('cache-control', 'no-store');
    const page = await listComplianceRequests(db, request.shop!.id, request.query);
    return { success: true, message: 'Compliance requests, newest first', complianceRequests: page.items.map((i) => i.node), nextCursor: nextCursor(page) };
  });
  app.get<{ Params: { id: string } }>('/complianceRequests/:id', async (request, reply) => {
    // A data request's document is a person's whole record.
    reply.header('cache-control', 'no-store');
    return { success: true, message: 'Compliance request', complianceRequest: await getComplianceRequest(db, request.shop!.id, request.params.id) };
  });
}
