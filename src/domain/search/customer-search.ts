import { sql } from 'kysely';
import { z } from 'zod';
import type { CustomerRow } from '../../db/schema.js';
import type { Queryable } from '../../db/transaction.js';
import { type Customer, prefixRange, toCustomer } from '../customers/index.js';
import { parseInput } from '../kernel/index.js';

/** How a search found a customer, most exact first. */
export const CUSTOMER_MATCHES = ['shop_customer_id', 'discount_code', 'email_prefix'] as const;
export type CustomerMatch = (typeof CUSTOMER_MATCHES)[number];
export type CustomerHit = { customer: Customer; matchedBy: CustomerMatch };

export const CUSTOMER_SEARCH_MAX = 50;

export const customerSearchSchema = z.strictObject({
  query: z.string().trim().min(1).max(320),
  first: z.int().min(1).max(CUSTOMER_SEARCH_MAX).default(20),
});

/**
 * What staff type into the console's search box, tried every way at once in one statement, each
 * way an index probe: the shop's customer id (exact, customers_shop_customer_id_key), a discount
 * code (exact, as typed or upper-cased, discount_codes_shop_code_key), and an e-mail prefix
 * (case-insensitive, a range of customers_shop_email_order_idx, at most `first` read). Exact
 * matches come first, then e-mails in the customers list's order; a customer found two ways
 * shows once, by the more exact.
 */
export async function searchCustomers(db: Queryable, shopId: string, input: { query: string; first?: number | null | undefined }): Promise<CustomerHit[]> {
  const { query, first } = parseInput(customerSearchSchema, { query: input.query, first: input.first ?? undefined });
  const [from, to] = prefixRange(query.toLowerCase());
  const emailKey = sql`(lower(email) collate "C")`;
  const { rows } = await sql<CustomerRow & { matched_by: CustomerMatch }>`
    select c.*, h.matched_by from (
      select distinct on (id) id, matched_by, rank from (
        (select id, 'shop_customer_id' as matched_by, 0 as rank from customers where shop_id = ${shopId} and shopify_customer_id = ${query})
        union all
        (select customer_id, 'discount_code', 1 from discount_codes where shop_id = ${shopId} and code = any(${[query, query.toUpperCase()]}::text[]))
        union all
        (select id, 'email_prefix', 2 from customers
          where shop_id = ${shopId} and ${emailKey} >= ${from} ${to === null ? sql`` : sql`and ${emailKey} < ${to}`}
          order by ${emailKey}, id limit ${first})
      ) found order by id, rank
    ) h join customers c on c.id = h.id
    order by h.rank, ${sql`(lower(c.email) collate "C")`}, c.id
    limit ${first}`.execute(db);
  return rows.map((row) => ({ customer: toCustomer(row), matchedBy: row.matched_by }));
}
