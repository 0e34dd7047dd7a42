import { z } from 'zod';
import type { DB } from '../../db/database.js';
import { inTransaction, type Queryable } from '../../db/transaction.js';
import { type Actor, changedFields, recordAudit } from '../audit/index.js';
import { getCustomer } from '../customers/index.js';
import { NotFoundError, parseInput } from '../kernel/index.js';
import { localeSchema } from './settings.js';
import { MAIL_KINDS, type MailKind } from './templates.js';

/** A customer's mail preferences, as the admin and storefront faces show them. */
export type MailPreferences = {
  customerId: string;
  /** False once the customer unsubscribed (the link, the storefront or the shop): no e-mail at all. */
  subscribed: boolean;
  unsubscribedAt: Date | null;
  /** The kinds the customer opted out of (the others are still sent, the shop sending them). */
  kindsOff: MailKind[];
  /** The customer's language for dates and numbers; null: the shop's. */
  locale: string | null;
  /** Whether the shop's server refused their address for good (lifted with mailSuppressionLift). */
  suppressed: boolean;
};

export async function getMailPreferences(db: Queryable, shopId: string, customerId: string): Promise<MailPreferences> {
  const customer = await getCustomer(db, shopId, { id: customerId });
  const [row, suppression] = await Promise.all([
    db.selectFrom('mail_preferences').selectAll().where('customer_id', '=', customer.id).executeTakeFirst(),
    db.selectFrom('mail_suppressions').select('address').where('shop_id', '=', shopId).where('address', '=', customer.email.toLowerCase()).executeTakeFirst(),
  ]);
  return {
    customerId: customer.id,
    subscribed: !row?.unsubscribed_at,
    unsubscribedAt: row?.unsubscribed_at ?? null,
    kindsOff: (row?.kinds_off ?? []).filter((k): k is MailKind => (MAIL_KINDS as readonly string[]).includes(k)),
    locale: row?.locale ?? null,
    suppressed: suppression !== undefined,
  };
}

export const mailPreferencesInputSchema = z.strictObject({
  subscribed: z.boolean().optional(),
  kindsOff: z.array(z.enum(MAIL_KINDS)).max(MAIL_KINDS.length).optional(),
  /** Null: the shop's. */
  locale: localeSchema.nullable().optional(),
});

/**
 * Changes what the input names and keeps the rest, for a customer of the shop (another shop's is
 * not found). Unsubscribing again keeps the first time. `actor`: the staff or key that changed them
 * (audited); none when the customer did (the storefront, the unsubscribe link).
 */
export async function updateMailPreferences(db: DB, shopId: string, customerId: string, raw: unknown, now: Date, actor?: Actor): Promise<MailPreferences> {
  const input = parseInput(mailPreferencesInputSchema, raw);
  return inTransaction(db, async (trx) => {
    const before = await getMailPreferences(trx, shopId, customerId);
    const values = {
      unsubscribed_at: input.subscribed === undefined ? before.unsubscribedAt : input.subscribed ? null : (before.unsubscribedAt ?? now),
      kinds_off: input.kindsOff ? [...new Set(input.kindsOff)] : before.kindsOff,
      locale: input.locale === undefined ? before.locale : input.locale,
      updated_at: now,
    };
    await trx
      .insertInto('mail_preferences')
      .values({ customer_id: before.customerId, shop_id: shopId, ...values })
      .onConflict((oc) => oc.column('customer_id').doUpdateSet(values))
      .execute();
    const after = await getMailPreferences(trx, shopId, customerId);
    await recordAudit(trx, shopId, actor, { kind: 'mailPreferences.update', subject: { type: 'customer', id: before.customerId }, ...changedFields(before, after) }, now);
    return after;
  });
}

/** Mails the address again: the shop lifts a suppression (the customer fixed their mailbox). Not found when the shop has none for it. */
export async function liftMailSuppression(db: DB, shopId: string, rawAddress: unknown, now: Date, actor?: Actor): Promise<{ address: string }> {
  const { address } = parseInput(z.strictObject({ address: z.string().trim().toLowerCase().min(1).max(320) }), { address: rawAddress });
  return inTransaction(db, async (trx) => {
    const lifted = await trx.deleteFrom('mail_suppressions').where('shop_id', '=', shopId).where('address', '=', address).returning(['address', 'reason']).executeTakeFirst();
    if (!lifted) throw new NotFoundError('suppression_not_found', `no suppression for "${address}"`, ['address']);
    await recordAudit(trx, shopId, actor, { kind: 'mailSuppression.lift', subject: { type: 'mailSuppression', id: address }, before: lifted, after: null }, now);
    return { address };
  });
}
