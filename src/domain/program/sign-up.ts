import type { z } from 'zod';
import type { DB } from '../../db/database.js';
import { inTransaction, type Trx } from '../../db/transaction.js';
import { type Actor, recordAudit } from '../audit/index.js';
import { type Customer, customerInputSchema, saveCustomerIn } from '../customers/index.js';
import { parseInput } from '../kernel/index.js';
import { awardSignUp } from './rule-awards.js';

/** Creates the customer, or updates e-mail and birthday of the one with that shopifyCustomerId. */
export async function upsertCustomer(db: DB, shopId: string, input: unknown, actor?: Actor): Promise<{ customer: Customer; created: boolean }> {
  const data = parseInput(customerInputSchema, input);
  return inTransaction(db, async (trx) => {
    const before = actor
      ? await trx.selectFrom('customers').select(['email', 'birthday']).where('shop_id', '=', shopId).where('shopify_customer_id', '=', data.shopifyCustomerId).forUpdate().executeTakeFirst()
      : undefined;
    const saved = await upsertCustomerIn(trx, shopId, data);
    const { email, birthday, points } = saved.customer;
    await recordAudit(trx, shopId, actor, {
      kind: saved.created ? 'customer.create' : 'customer.update',
      subject: { type: 'customer', id: saved.customer._id },
      before: before ?? null,
      after: { shopifyCustomerId: data.shopifyCustomerId, email, birthday, points },
    });
    return saved;
  });
}

/**
 * The upsert inside the caller's transaction (a referral sign-up creates its referee this way). A
 * customer it creates gets the sign-up rule's points in the same transaction.
 */
export async function upsertCustomerIn(
  trx: Trx,
  shopId: string,
  data: z.output<typeof customerInputSchema>,
  options: {
    /**
     * When the customer signed up with the shop, as its source says (Shopify's created_at; null:
     * it did not say): the sign-up bonus then goes only to one who signed up since the program
     * started (awardSignUp). Left out: the sign-up is this call.
     */
    signedUpAt?: Date | null;
  } = {},
): Promise<{ customer: Customer; created: boolean }> {
  const saved = await saveCustomerIn(trx, shopId, data);
  if (!saved.created) return saved;
  return { customer: await awardSignUp(trx, shopId, saved.customer, options.signedUpAt), created: true };
}
