import type { DB } from '../../db/database.js';
import { inTransaction, type Trx } from '../../db/transaction.js';
import { type Actor, recordAudit, redactAuditValues } from '../audit/index.js';
import { endCode } from '../codes/index.js';
import { type Customer, type CustomerKey, endCustomerTokens, getCustomer, toCustomer } from '../customers/index.js';
import { parseInput, recordEvent, redactEvents, type Redactions } from '../kernel/index.js';
import { forgetMailRecipient } from '../mail/index.js';
import { forgetShopifyCustomer } from '../shopify/index.js';
import { purgeDeliveriesCarrying } from '../webhooks/index.js';
import { customerDataInputSchema, personalMarks } from './customer-export.js';

export type CustomerErased = { customer: Customer; cancelledCodes: number; revokedTokens: number; purgedDeliveries: number; purgedShopifyWebhooks: number };

/** The values a tombstone carries instead of the person's: unique, recognisable, and naming no one. */
export const tombstoneOf = (customerId: string) => ({ email: `erased-${customerId}@erased.invalid`, shopifyCustomerId: `erased-${customerId}` });

/**
 * Erases a customer (issue 37, item 3; GDPR art. 17): one transaction under the customer's row lock
 * (FOR UPDATE: every balance change takes the weaker lock on it, so writes in flight finish first
 * and later ones find the tombstone). The row stays as a tombstone with its balance, ledger, orders
 * and codes, so the program's liability and insights still add up; their e-mail, shop customer id
 * and birthday are replaced; their issued codes are cancelled (no points back: the balance stays the
 * tombstone's), their tokens revoked, and what carries their data elsewhere is purged: webhook
 * payloads, events still in the outbox, Shopify's bodies, e-mail records, audit values.
 */
export async function eraseCustomer(db: DB, shopId: string, input: unknown, actor?: Actor, now = new Date()): Promise<CustomerErased> {
  const { customerIdentifier } = parseInput(customerDataInputSchema, input);
  return inTransaction(db, (trx) => eraseCustomerIn(trx, shopId, customerIdentifier, actor, now));
}

/** The erasure inside the caller's transaction: Shopify's customers/redact settles its inbox row in the same one. */
export async function eraseCustomerIn(trx: Trx, shopId: string, customerIdentifier: CustomerKey, actor: Actor | undefined, now: Date): Promise<CustomerErased> {
  const found = await getCustomer(trx, shopId, customerIdentifier);
  // Locked by id: its identifiers may change until the lock is held; read again under it.
  const row = await trx.selectFrom('customers').selectAll().where('id', '=', found.id).forUpdate().executeTakeFirstOrThrow();
  const tombstone = tombstoneOf(row.id);
  // Codes another write holds (an order using one, an expiry) are theirs to end: waiting for them
  // would deadlock, as they lock a code before its customer.
  const codes = await trx.selectFrom('discount_codes').selectAll().where('customer_id', '=', row.id).where('status', '=', 'issued').orderBy('id').forUpdate().skipLocked().execute();
  for (const code of codes) await endCode(trx, code, { status: 'cancelled', at: now });
  const revoked = await trx.updateTable('customer_access_tokens').set({ revoked_at: now }).where('customer_id', '=', row.id).where('revoked_at', 'is', null).executeTakeFirst();
  if (revoked.numUpdatedRows > 0n) endCustomerTokens(trx, { shopId, customerId: row.id });

  const purgedDeliveries = await purgeDeliveriesCarrying(trx, shopId, personalMarks(row), now);
  const redactions = redactionsOf(row, tombstone);
  await redactEvents(trx, shopId, redactions);
  await redactAuditValues(trx, shopId, redactions);
  await forgetMailRecipient(trx, shopId, row.id, row.email, now);
  // The exports Shopify's data requests made of them: kept for the shop to hand over, theirs to lose now.
  await trx.updateTable('compliance_requests').set({ document: null }).where('shop_id', '=', shopId).where('customer_id', '=', row.id).execute();
  const purgedShopifyWebhooks = await forgetShopifyCustomer(trx, shopId, { shopifyCustomerId: row.shopify_customer_id, email: row.email }, now);

  const erased = await trx
    .updateTable('customers')
    .set({ email: tombstone.email, shopify_customer_id: tombstone.shopifyCustomerId, birthday: null, erased_at: now, updated_at: now })
    .where('id', '=', row.id)
    .returningAll()
    .executeTakeFirstOrThrow();
  const customer = toCustomer(erased);
  await recordEvent(trx, shopId, 'customers/erased', { customer: row.id, erasedAt: now });
  // The log names the customer by id: what they were is what was erased.
  await recordAudit(trx, shopId, actor, { kind: 'customer.erase', subject: { type: 'customer', id: row.id }, after: { cancelledCodes: codes.length } }, now);
  return { customer, cancelledCodes: codes.length, revokedTokens: Number(revoked.numUpdatedRows), purgedDeliveries: purgedDeliveries.length, purgedShopifyWebhooks };
}

/** The person's values as jsonb prints them, each with its tombstone's. */
function redactionsOf(row: { email: string; shopify_customer_id: string; birthday: string | null }, tombstone: ReturnType<typeof tombstoneOf>): Redactions {
  const pairs: Array<[string, string]> = [
    [JSON.stringify(row.email), JSON.stringify(tombstone.email)],
    [`"shopifyCustomerId": ${JSON.stringify(row.shopify_customer_id)}`, `"shopifyCustomerId": ${JSON.stringify(tombstone.shopifyCustomerId)}`],
  ];
  if (row.birthday) pairs.push([`"birthday": ${JSON.stringify(row.birthday)}`, '"birthday": null']);
  return pairs;
}
