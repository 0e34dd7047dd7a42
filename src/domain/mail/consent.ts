import { createHmac, timingSafeEqual } from 'node:crypto';
import type { Queryable } from '../../db/transaction.js';

/**
 * Consent (issue 36, item 3). The unsubscribe link carries a token anyone holding the e-mail may
 * use without signing in: the customer and shop it names, signed with HMAC-SHA256 under a key of
 * the server's (derived from SECRETS_KEY), so it cannot be forged for another customer, and
 * needs no row of its own. It does not expire: an old e-mail's link must still work.
 */
const VERSION = 'u1';

const mac = (key: Buffer, payload: string) => createHmac('sha256', key).update(`${VERSION}.${payload}`).digest('base64url');

export function unsubscribeToken(key: Buffer, shopId: string, customerId: string): string {
  const payload = Buffer.from(JSON.stringify([shopId, customerId])).toString('base64url');
  return `${VERSION}.${payload}.${mac(key, payload)}`;
}

/** The shop and customer a token names, or undefined when it is not one we signed. */
export function readUnsubscribeToken(key: Buffer, token: string): { shopId: string; customerId: string } | undefined {
  const [version, payload, signature] = token.split('.');
  if (version !== VERSION || !payload || !signature) return undefined;
  const expected = Buffer.from(mac(key, payload));
  const given = Buffer.from(signature);
  if (given.length !== expected.length || !timingSafeEqual(given, expected)) return undefined;
  try {
    const value: unknown = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8'));
    if (Array.isArray(value) && typeof value[0] === 'string' && typeof value[1] === 'string') return { shopId: value[0], customerId: value[1] };
  } catch {
    // a payload we signed is always JSON; fall through
  }
  return undefined;
}

/** Sets whether the customer wants the shop's e-mails; false for a customer of another shop or none. */
export async function setMailConsent(db: Queryable, shopId: string, customerId: string, subscribed: boolean, now: Date): Promise<boolean> {
  const customer = await db.selectFrom('customers').select('id').where('id', '=', customerId).where('shop_id', '=', shopId).executeTakeFirst();
  if (!customer) return false;
  const unsubscribed_at = subscribed ? null : now;
  await db
    .insertInto('mail_preferences')
    .values({ customer_id: customerId, shop_id: shopId, unsubscribed_at, updated_at: now })
    // A second click keeps the first one's time.
    .onConflict((oc) => oc.column('customer_id').doUpdateSet((eb) => ({ unsubscribed_at: subscribed ? null : eb.fn.coalesce('mail_preferences.unsubscribed_at', eb.val(now)), updated_at: now })))
    .execute();
  return true;
}

/** The unsubscribe link's action: the customer the token names gets no more e-mails. */
export async function unsubscribeByToken(db: Queryable, key: Buffer, token: string, now: Date): Promise<boolean> {
  const who = readUnsubscribeToken(key, token);
  if (!who) return false;
  return setMailConsent(db, who.shopId, who.customerId, false, now);
}
