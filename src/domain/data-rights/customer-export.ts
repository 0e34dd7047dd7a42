import { sql } from 'kysely';
import { z } from 'zod';
import type { CustomerRow } from '../../db/schema.js';
import type { Queryable } from '../../db/transaction.js';
import { listDiscountCodesOfCustomers } from '../codes/index.js';
import { customerIdentifierSchema, getCustomer, toCustomer } from '../customers/index.js';
import { containsAny, type Page, type PageArgs, parseInput } from '../kernel/index.js';
import { listActivitiesOfCustomers } from '../ledger/index.js';
import { listOrdersOfCustomers } from '../orders/index.js';

/** Names the customer of an export or an erasure. */
export const customerDataInputSchema = z.strictObject({ customerIdentifier: customerIdentifierSchema });

/** Rows per read while the export walks a customer's lists (keyset pages, as the API serves them). */
const PAGE = 1000;

/**
 * Everything the service holds on one customer (issue 37, item 2): what a data-protection request
 * (GDPR art. 15, CCPA "right to know") hands over, as one JSON document. Other people's data never
 * comes with it: the customers a referral links are named by their id only.
 */
export async function exportCustomerData(db: Queryable, shopId: string, input: unknown, now = new Date()) {
  const { customerIdentifier } = parseInput(customerDataInputSchema, input);
  return customerDocument(db, shopId, await getCustomer(db, shopId, customerIdentifier), now);
}

/** The export's document of a customer already found (Shopify's data requests find theirs by Shopify's id or e-mail). */
export async function customerDocument(db: Queryable, shopId: string, row: CustomerRow, now: Date) {
  const id = row.id;
  const [ledger, orders, discountCodes] = await Promise.all([
    allOf((args) => listActivitiesOfCustomers(db, shopId, [id], args)),
    allOf((args) => listOrdersOfCustomers(db, shopId, [id], args)),
    allOf((args) => listDiscountCodesOfCustomers(db, shopId, [id], args)),
  ]);
  const [tier, pendingPoints, ruleAwards, referralCode, referrals, accessTokens, preference, emails, webhookDeliveries] = await Promise.all([
    db.selectFrom('tier_members as m').leftJoin('tiers as t', 't.id', 'm.tier_id')
      .select(['t.id', 't.name', 'm.since', 'm.override_until', 'm.override_reason']).where('m.customer_id', '=', id).executeTakeFirst(),
    db.selectFrom('pending_points').select(['id', 'order_id', 'points', 'available_at', 'released_at', 'created_at'])
      .where('customer_id', '=', id).orderBy('created_at').execute(),
    db.selectFrom('rule_awards').select(['id', 'rule_id', 'period', 'reference', 'points', 'created_at']).where('customer_id', '=', id).orderBy('created_at').execute(),
    db.selectFrom('referral_codes').select(['code', 'created_at']).where('customer_id', '=', id).executeTakeFirst(),
    db.selectFrom('referrals').select(['id', 'referee_id', 'referrer_id', 'referral_code', 'status', 'created_at'])
      .where('shop_id', '=', shopId).where((eb) => eb.or([eb('referee_id', '=', id), eb('referrer_id', '=', id)])).orderBy('seq').execute(),
    // The tokens' metadata: never their hashes.
    db.selectFrom('customer_access_tokens').select(['id', 'prefix', 'created_at', 'expires_at', 'revoked_at']).where('customer_id', '=', id).orderBy('created_at').execute(),
    db.selectFrom('mail_preferences').select(['unsubscribed_at', 'updated_at']).where('customer_id', '=', id).executeTakeFirst(),
    db.selectFrom('mail_messages').select(['id', 'kind', 'status', 'to_address', 'created_at', 'sent_at', 'attempts', 'last_error'])
      .where('shop_id', '=', shopId).where('customer_id', '=', id).orderBy('created_at').execute(),
    deliveriesCarrying(db, shopId, row),
  ]);
  return {
    exportedAt: now,
    customer: { ...toCustomer(row), erasedAt: row.erased_at },
    tier: tier ? { id: tier.id, name: tier.name, since: tier.since, overrideUntil: tier.override_until, overrideReason: tier.override_reason } : null,
    ledger,
    pendingPoints: pendingPoints.map((p) => ({ id: p.id, orderId: p.order_id, points: p.points, availableAt: p.available_at, releasedAt: p.released_at, createdAt: p.created_at })),
    ruleAwards: ruleAwards.map((a) => ({ id: a.id, ruleId: a.rule_id, period: a.period, reference: a.reference, points: a.points, createdAt: a.created_at })),
    orders,
    discountCodes,
    referralCode: referralCode ? { code: referralCode.code, createdAt: referralCode.created_at } : null,
    referrals: referrals.map((r) => ({
      id: r.id,
      role: r.referee_id === id ? ('referee' as const) : ('referrer' as const),
      // The other party by id only: their data is theirs.
      otherCustomer: r.referee_id === id ? r.referrer_id : r.referee_id,
      referralCode: r.referral_code,
      status: r.status,
      createdAt: r.created_at,
    })),
    accessTokens: accessTokens.map((t) => ({ id: t.id, prefix: t.prefix, createdAt: t.created_at, expiresAt: t.expires_at, revokedAt: t.revoked_at })),
    emailPreferences: { unsubscribedAt: preference?.unsubscribed_at ?? null },
    emails: emails.map((m) => ({ id: m.id, kind: m.kind, status: m.status, to: m.to_address, createdAt: m.created_at, sentAt: m.sent_at, attempts: m.attempts, lastError: m.last_error })),
    webhookDeliveries,
  };
}

export type CustomerDataExport = Awaited<ReturnType<typeof customerDocument>>;

/** Every item of a keyset-paged list, page after page. */
async function allOf<T>(page: (args: PageArgs) => Promise<Array<Page<T>>>): Promise<T[]> {
  const all: T[] = [];
  let after: string | undefined;
  for (;;) {
    const [one] = await page({ first: PAGE, after });
    for (const { node } of one!.items) all.push(node);
    if (!one!.hasNextPage || one!.items.length === 0) return all;
    after = one!.items.at(-1)!.cursor;
  }
}

/**
 * The shop's webhook deliveries whose payload carried the customer (by their id, which every event
 * names, their e-mail or their shop customer id): where their data went and when. Not the payloads:
 * one may carry another customer too (a referral names both), and theirs is in the rest of the
 * document. A pass over the shop's deliveries, which are purged after their retention.
 */
async function deliveriesCarrying(db: Queryable, shopId: string, row: { id: string; email: string; shopify_customer_id: string }) {
  const { rows } = await sql<{ id: string; topic: string; status: string; created_at: Date; callback_url: string | null }>`
    select d.id, d.topic, d.status, d.created_at, s.callback_url from webhook_deliveries d
    left join webhook_subscriptions s on s.id = d.subscription_id
    where d.shop_id = ${shopId} and ${containsAny(sql.ref('d.payload'), [JSON.stringify(row.id), ...personalMarks(row)])}
    order by d.created_at, d.id`.execute(db);
  return rows.map((d) => ({ id: d.id, topic: d.topic, status: d.status, createdAt: d.created_at, sentTo: d.callback_url }));
}

/**
 * How a customer's personal data shows in a JSON text we wrote (JSON.stringify, no spaces): their
 * e-mail as a string (matched in any letter case), and their shop customer id under its key (a
 * bare "1001" may be an order's).
 */
export function personalMarks(row: { email: string; shopify_customer_id: string }): string[] {
  return [JSON.stringify(row.email), `"shopifyCustomerId":${JSON.stringify(row.shopify_customer_id)}`];
}
