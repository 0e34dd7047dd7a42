import type { Queryable } from '../../db/transaction.js';
import { listCustomers } from '../customers/index.js';
import { customerTiers } from '../program/index.js';
import { csvRecord } from './csv.js';

/** Rows a page reads: big enough that a statement's round trip is nothing beside its rows, small enough to hold. */
export const EXPORT_PAGE = 5_000;

/**
 * The customer export's columns, named as LoyaltyLion's customer record (merchant_id,
 * points_approved, points_pending, birthday) or Smile's (created_at) names the same thing;
 * docs/api.md "Exports" says which is which.
 */
export const CUSTOMER_COLUMNS = ['id', 'merchant_id', 'email', 'birthday', 'points_approved', 'points_pending', 'tier', 'created_at'] as const;

/**
 * Every customer of the shop as CSV, a header then one chunk per page. Pages are keyset pages in
 * e-mail order (the customers list's index), read one at a time as the consumer pulls: memory
 * holds one page whatever the shop's size. Each page is its own statement, not one snapshot: a
 * customer changed during the export shows as the page that read it saw it.
 */
export async function* customersCsv(db: Queryable, shopId: string, pageSize = EXPORT_PAGE): AsyncGenerator<string> {
  yield csvRecord(CUSTOMER_COLUMNS);
  let after: string | undefined;
  for (;;) {
    const page = await listCustomers(db, shopId, { first: pageSize, after });
    const customers = page.items.map((item) => item.node);
    const tiers = customers.length ? await customerTiers(db, shopId, customers.map((c) => c._id)) : [];
    let chunk = '';
    customers.forEach((c, i) => {
      chunk += csvRecord([c._id, c.shopifyCustomerId, c.email, c.birthday, c.points, c.pendingPoints, tiers[i]?.tier.name ?? null, c.createdAt.toISOString()]);
    });
    if (chunk) yield chunk;
    if (!page.hasNextPage) return;
    after = page.items.at(-1)!.cursor;
  }
}
