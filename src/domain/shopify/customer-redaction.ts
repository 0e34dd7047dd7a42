import { sql } from 'kysely';
import type { Trx } from '../../db/transaction.js';
import { parseShopifyJson } from './shopify-payloads.js';

/** The keys of a Shopify order body that describe the person, not the order. */
const PERSONAL_ORDER_KEYS = ['email', 'contact_email', 'phone', 'billing_address', 'shipping_address', 'note', 'note_attributes', 'client_details', 'browser_ip', 'customer_locale'];

/**
 * Forgets what Shopify told us of one person (a customer's erasure, issue 37): the inbox bodies that
 * carry them are emptied (an unapplied one is set aside as erased: applying it later would bring
 * them back), their orders' stored bodies lose the person's keys, and the record of their latest
 * state goes. An order body keeps its customer's Shopify id, reduced to it: a later refund of the
 * order must still parse and reach the order. Returns the inbox rows emptied.
 */
export async function forgetShopifyCustomer(trx: Trx, shopId: string, person: { shopifyCustomerId: string; email: string }, now: Date): Promise<number> {
  const email = person.email.toLowerCase();
  // Candidates by text (a body jsonb refused cannot be cast), decided by reading each.
  const candidates = await trx
    .selectFrom('shopify_inbox')
    .select(['id', 'topic', 'body'])
    .where('shop_id', '=', shopId)
    .where(sql<boolean>`(strpos(lower(body), ${email}) > 0 or strpos(body, ${person.shopifyCustomerId}) > 0)`)
    .execute();
  const carrying = candidates.filter((row) => carriesPerson(row, person.shopifyCustomerId, email)).map((row) => row.id);
  if (carrying.length) {
    await trx
      .updateTable('shopify_inbox')
      .set({ body: '{}', processed_at: sql`coalesce(processed_at, ${now})`, error: sql`case when processed_at is null then 'erased: the customer it carried was erased' else error end` })
      .where('id', 'in', carrying)
      .execute();
  }
  await trx
    .updateTable('shopify_orders')
    .set({ order_body: sql`(order_body - ${sql.val(PERSONAL_ORDER_KEYS)}::text[]) || jsonb_build_object('customer', jsonb_build_object('id', order_body->'customer'->'id'))` })
    .where('shop_id', '=', shopId)
    .where(sql<boolean>`order_body->'customer'->>'id' = ${person.shopifyCustomerId}`)
    .execute();
  await trx.deleteFrom('shopify_customers').where('shop_id', '=', shopId).where('shopify_customer_id', '=', person.shopifyCustomerId).execute();
  return carrying.length;
}

/** Whether an inbox body is about the person: their customer record, an order or refund of theirs, or their e-mail anywhere. */
function carriesPerson(row: { topic: string; body: string }, shopifyCustomerId: string, email: string): boolean {
  if (row.body.toLowerCase().includes(JSON.stringify(email).toLowerCase())) return true;
  let body: unknown;
  try {
    body = parseShopifyJson(row.body);
  } catch {
    return false;
  }
  if (typeof body !== 'object' || body === null) return false;
  const record = body as { id?: unknown; customer?: { id?: unknown } | null };
  // customers/create and /update are the customer; the others (an order, a refund, a compliance request) name one.
  if (row.topic === 'customers/create' || row.topic === 'customers/update') return String(record.id) === shopifyCustomerId;
  return String(record.customer?.id) === shopifyCustomerId;
}
