import { createHmac, timingSafeEqual } from 'node:crypto';
import type { DB } from '../../db/database.js';
import { NotFoundError } from '../kernel/index.js';
import { updateMailPreferences } from './preferences.js';

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

/** Where the unsubscribe link points: the public route of src/http/mail-unsubscribe.ts. */
const UNSUBSCRIBE_PATH = '/mail/unsubscribe';

/** The customer's unsubscribe link under the service's public URL. */
export function unsubscribeUrl(publicUrl: string, key: Buffer, shopId: string, customerId: string): string {
  return `${publicUrl.replace(/\/$/, '')}${UNSUBSCRIBE_PATH}?token=${unsubscribeToken(key, shopId, customerId)}`;
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
export async function setMailConsent(db: DB, shopId: string, customerId: string, subscribed: boolean, now: Date): Promise<boolean> {
  try {
    await updateMailPreferences(db, shopId, customerId, { subscribed }, now);
    return true;
  } catch (err) {
    if (err instanceof NotFoundError) return false;
    throw err;
  }
}

/** The unsubscribe link's action: the customer the token names gets no more e-mails. */
export async function unsubscribeByToken(db: DB, key: Buffer, token: string, now: Date): Promise<boolean> {
  const who = readUnsubscribeToken(key, token);
  if (!who) return false;
  return setMailConsent(db, who.shopId, who.customerId, false, now);
}
