import type { Trx } from '../../db/transaction.js';

/**
 * Forgets a customer's address (their erasure, in its transaction): the record of each e-mail keeps
 * its kind, state and times but not where it went nor what it said; one still queued is skipped; the
 * address leaves the shop's suppressions.
 */
export async function forgetMailRecipient(trx: Trx, shopId: string, customerId: string, email: string, now: Date): Promise<void> {
  await trx.updateTable('mail_messages').set({ to_address: null, data: '{}', updated_at: now }).where('shop_id', '=', shopId).where('customer_id', '=', customerId).execute();
  await trx
    .updateTable('mail_messages')
    .set({ status: 'skipped', due_at: null, last_error: 'the customer was erased' })
    .where('shop_id', '=', shopId)
    .where('customer_id', '=', customerId)
    .where('status', '=', 'queued')
    .execute();
  await trx.deleteFrom('mail_suppressions').where('shop_id', '=', shopId).where('address', '=', email.toLowerCase()).execute();
}
