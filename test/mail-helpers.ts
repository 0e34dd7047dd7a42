import type { ParsedMail } from 'mailparser';
import { expect } from 'vitest';
import { queueMail } from '../src/domain/mail/index.js';
import { createPointsRedemption } from '../src/domain/rewards/index.js';
import { inTransaction } from '../src/db/transaction.js';
import type { TestApp } from './helpers.js';

/** What the mail tests share: a shop that sends through the test's SMTP server, its queue, and the parts of a received e-mail. */
export const PUBLIC_URL = 'https://loyalty.example';

export const SETTINGS = `mutation($input: ShopMailSettingsInput!) { shopMailSettingsUpdate(input: $input) {
  shopMailSettings { enabled smtpHost smtpPort smtpSecurity smtpUser passwordSet fromName fromAddress kinds }
  userErrors { code field message } } }`;

/** A shop sending through `port` (with `settings` over the defaults), and a reward worth 100 points whose codes last 30 days. */
export async function mailingShop(t: TestApp, port: number, name = 'Shop <b>&', settings: Record<string, unknown> = {}): Promise<{ shopId: string; apiKey: string; rewardId: string }> {
  const shop = await t.shop(name);
  const res = await t.graphql(shop.apiKey, SETTINGS, {
    input: { enabled: true, smtpHost: '127.0.0.1', smtpPort: port, smtpSecurity: 'none', smtpUser: 'mailer', smtpPassword: 'hunter2', fromName: 'Rewards team', fromAddress: 'rewards@shop.example', ...settings },
  });
  expect(res.data.shopMailSettingsUpdate.userErrors).toEqual([]);
  const { pointsRedemption } = await createPointsRedemption(t.app.database.db, shop.shopId, {
    name: '$5 off', type: 'amount', discountPrefix: 'FIVE-', rewardValue: 100, discountValue: 5, expireDateType: 'days', expireDays: 30,
  });
  return { ...shop, rewardId: pointsRedemption._id };
}

/** Redeems 100 points of `customer` for the shop's reward; the code. */
export async function redeem(t: TestApp, shop: { apiKey: string; rewardId: string }, customer: string): Promise<string> {
  const res = await t.post('/rest-api/v1/pointsRedemptions', { customerIdentifier: customer, pointsAmount: 100, rewardId: shop.rewardId }, shop.apiKey);
  expect(res.status).toBe(200);
  return (await res.json()).discountCode;
}

export const messagesOf = (t: TestApp, shopId: string) =>
  t.app.database.db.selectFrom('mail_messages').selectAll().where('shop_id', '=', shopId).orderBy('created_at').orderBy('id').execute();

/** All `count` e-mails are queued and none has anything left to do. */
export const settled = (rows: Array<{ due_at: Date | null }>, count: number) => rows.length === count && rows.every((r) => r.due_at === null);

/** The shop's events of `type` queued for e-mail again, as a second relay of them would: it must add nothing. */
export async function requeue(t: TestApp, shopId: string, type: string): Promise<void> {
  const db = t.app.database.db;
  const events = await db.selectFrom('outbox_events').selectAll().where('shop_id', '=', shopId).where('type', '=', type).execute();
  await inTransaction(db, (trx) => queueMail(trx, events.map((e) => ({ id: e.id, shopId: e.shop_id, type: e.type, data: e.data, createdAt: e.created_at })), new Date()));
}

/** A header as it was sent (mailparser folds the List-* ones into an object of its own), unfolded. */
export function rawHeader(mail: ParsedMail, name: string): string | undefined {
  const line = mail.headerLines.find((h) => h.key === name.toLowerCase())?.line;
  return line?.slice(line.indexOf(':') + 1).replace(/\r?\n[ \t]+/g, '').trim();
}

/** The link of the List-Unsubscribe header, pointed at the test server instead of PUBLIC_URL. */
export function unsubscribeLink(t: TestApp, mail: ParsedMail): string {
  const url = /^<([^>]+)>$/.exec(rawHeader(mail, 'List-Unsubscribe') ?? '')?.[1] ?? '';
  expect(url.startsWith(`${PUBLIC_URL}/mail/unsubscribe?token=`)).toBe(true);
  return url.replace(PUBLIC_URL, t.url);
}
