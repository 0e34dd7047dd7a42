import { sql } from 'kysely';
import type { CustomerRow } from '../../db/schema.js';
import type { Queryable, Trx } from '../../db/transaction.js';
import { z } from 'zod';
import { beforeTimeCursor, encodeTimeCursor, newId, NotFoundError, type Page, type PageArgs, parseInput, recordEvent } from '../kernel/index.js';
import { scheduleShopDeletion } from '../shop-exit/index.js';
import type { ShopifyComplianceRequest } from '../shopify/index.js';
import { eraseCustomerIn } from './customer-erasure.js';
import { customerDocument } from './customer-export.js';

/**
 * Shopify's compliance webhooks answered (issue 37, item 4; docs/data-rights.md), in the transaction
 * that marks the inbox row applied: customers/data_request keeps the customer's export for the shop
 * to hand over, customers/redact erases them, shop/redact schedules the shop's deletion `graceDays` on. Each is
 * recorded as a compliance request, an unknown customer too (outcome `unknown_customer`, nothing done).
 */
export async function answerShopifyCompliance(trx: Trx, shopId: string, request: ShopifyComplianceRequest, now: Date, graceDays: number): Promise<void> {
  const id = newId();
  const record = (outcome: ComplianceOutcome, customerId: string | null, document: unknown = null) =>
    trx
      .insertInto('compliance_requests')
      .values({
        id,
        shop_id: shopId,
        topic: request.topic,
        outcome,
        customer_id: customerId,
        shopify_request_id: request.dataRequestId,
        orders_requested: request.topic === 'shop/redact' ? null : JSON.stringify(request.orders),
        document: document === null ? null : JSON.stringify(document),
        received_at: now,
      })
      .execute();
  if (request.topic === 'shop/redact') {
    await scheduleShopDeletion(trx, shopId, { reason: 'shopify shop/redact', graceDays }, undefined, now);
    return void (await record('shop_deletion_scheduled', null));
  }
  const customer = await customerOf(trx, shopId, request.customer!);
  if (!customer) return void (await record('unknown_customer', null));
  if (request.topic === 'customers/redact') {
    await eraseCustomerIn(trx, shopId, { id: customer.id }, undefined, now);
    return void (await record('erased', customer.id));
  }
  await record('exported', customer.id, await customerDocument(trx, shopId, customer, now));
  // The shop's backend learns of it as of any change, and sends the customer their data.
  await recordEvent(trx, shopId, 'customers/data_requested', { customer: customer.id, complianceRequest: id, shopifyDataRequestId: request.dataRequestId });
}

type ComplianceOutcome = 'exported' | 'erased' | 'unknown_customer' | 'shop_deletion_scheduled';

/** Shopify's customer id is the shop customer id; the e-mail is the fallback (a customer created before the connection). Tombstones match neither. */
async function customerOf(trx: Trx, shopId: string, person: { id: string | null; email: string | null }): Promise<CustomerRow | undefined> {
  const base = () => trx.selectFrom('customers').selectAll().where('shop_id', '=', shopId).where('erased_at', 'is', null);
  const byId = person.id ? await base().where('shopify_customer_id', '=', person.id).executeTakeFirst() : undefined;
  if (byId || !person.email) return byId;
  return base().where(sql<string>`lower(email)`, '=', person.email.toLowerCase()).executeTakeFirst();
}

export type ComplianceRequest = {
  _id: string;
  topic: string;
  outcome: ComplianceOutcome;
  customer: string | null;
  shopifyDataRequestId: string | null;
  ordersRequested: string[] | null;
  receivedAt: Date;
};

const toRequest = (r: { id: string; topic: string; outcome: string; customer_id: string | null; shopify_request_id: string | null; orders_requested: unknown; received_at: Date }): ComplianceRequest => ({
  _id: r.id,
  topic: r.topic,
  outcome: r.outcome as ComplianceOutcome,
  customer: r.customer_id,
  shopifyDataRequestId: r.shopify_request_id,
  ordersRequested: (r.orders_requested as string[] | null) ?? null,
  receivedAt: r.received_at,
});

const LISTED = ['id', 'topic', 'outcome', 'customer_id', 'shopify_request_id', 'orders_requested', 'received_at'] as const;

/** GET /complianceRequests: `first` (1-250, default 50) and `after`, a cursor of the previous page. */
export const complianceRequestsQuerySchema = z.object({
  first: z.preprocess((v) => (v === undefined || v === '' ? 50 : typeof v === 'string' && /^\s*\d{1,10}\s*$/.test(v) ? Number(v) : v), z.number().int().min(1).max(250)),
  after: z.preprocess((v) => (v === '' ? undefined : v), z.string().trim().max(200).optional()),
});

/** The shop's compliance requests, newest first, without their documents. */
export async function listComplianceRequests(db: Queryable, shopId: string, input: unknown): Promise<Page<ComplianceRequest>> {
  const args: PageArgs = parseInput(complianceRequestsQuerySchema, input);
  let query = db.selectFrom('compliance_requests').select(LISTED).where('shop_id', '=', shopId);
  if (args.after) query = query.where(beforeTimeCursor(args.after, 'received_at'));
  const rows = await query.orderBy('received_at', 'desc').orderBy('id', 'desc').limit(args.first + 1).execute();
  return {
    items: rows.slice(0, args.first).map((row) => ({ node: toRequest(row), cursor: encodeTimeCursor({ created_at: row.received_at, id: row.id }) })),
    hasNextPage: rows.length > args.first,
  };
}

/**
 * One request with its document: for a data request, the customer's export as it stood when Shopify
 * asked (null once the customer was erased, or when the shop did not know them).
 */
export async function getComplianceRequest(db: Queryable, shopId: string, id: string): Promise<ComplianceRequest & { document: unknown }> {
  const row = await db.selectFrom('compliance_requests').select([...LISTED, 'document']).where('shop_id', '=', shopId).where('id', '=', id).executeTakeFirst();
  if (!row) throw new NotFoundError('compliance_request_not_found', `no compliance request with id ${id}`, ['id']);
  return { ...toRequest(row), document: row.document ?? null };
}
