import type { ClaimedMail } from './queue.js';
import { z } from 'zod';
import type { Queryable } from '../../db/transaction.js';
import { getCustomer } from '../customers/index.js';
import { parseInput, RuleViolationError, type SecretBox, shopPeriods } from '../kernel/index.js';
import { unsubscribeUrl } from './consent.js';
import { mailTemplateSchema, shopTemplates } from './shop-templates.js';
import { getMailSettings, type OpenMailSettings, openMailSettings } from './settings.js';
import { escapeHtml, formatPoints, formatShopDate, MAIL_KINDS, type MailKind, type MailVariables, type RenderedMail, renderMail } from './templates.js';
import { createMailTransport, type OutgoingMail, type SendOutcome } from './transport.js';

/** Until customers have names, an e-mail greets them by their address's local part. */
const nameOf = (email: string) => email.split('@')[0] ?? email;

function rewardOf(data: Record<string, unknown>): string {
  const value = String(data.value ?? '');
  const amount = typeof data.currency === 'string' ? `${value} ${data.currency}` : value;
  switch (data.type) {
    case 'percentage':
      return `${value} % off`;
    case 'shipping':
      return Number(value) > 0 ? `free shipping up to ${amount}` : 'free shipping';
    case 'free_product':
      return 'a free product';
    default:
      return `${amount} off`;
  }
}

const dateOf = (value: unknown) => (typeof value === 'string' ? new Date(value) : null);

/** What a message's variables are made of: its shop, and the message with its customer's address, balance and locale. */
export type MailShop = Pick<OpenMailSettings, 'shopName' | 'timeZone' | 'locale'>;
export type MailOf = Pick<ClaimedMail, 'kind' | 'data' | 'email' | 'balance' | 'created_at' | 'locale'>;

/** The variables of a message: its customer, its shop, and what its kind is about, dates and numbers in the customer's locale. */
export function mailVariables(settings: MailShop, claimed: MailOf, unsubscribeUrl: string): MailVariables {
  const data = (claimed.data ?? {}) as Record<string, unknown>;
  const locale = claimed.locale ?? settings.locale ?? 'en';
  const number = (value: unknown) => formatPoints(Number(value ?? 0), locale);
  const common = { shopName: settings.shopName, customerName: nameOf(claimed.email), email: claimed.email, balance: number(claimed.balance), unsubscribeUrl };
  const shopDate = (at: Date) => formatShopDate(at, settings.timeZone, locale);
  const points = number(data.points);
  switch (claimed.kind) {
    case 'reward_issued':
    case 'code_expiring': {
      const expiresAt = dateOf(data.expiresAt);
      return {
        ...common,
        code: String(data.code ?? ''),
        reward: rewardOf(data),
        pointsSpent: data.pointsAmount === undefined ? '' : number(data.pointsAmount),
        expiresAt: expiresAt ? shopDate(expiresAt) : '',
        terms: `Use it once at checkout${expiresAt ? `, until ${shopDate(expiresAt)}` : ''}.`,
      };
    }
    case 'points_earned': {
      const day = typeof data.day === 'string' ? data.day : claimed.created_at.toISOString().slice(0, 10);
      // The day is a calendar date already: formatted at its noon in UTC, whatever zone, it stays that date.
      return { ...common, points, date: formatShopDate(new Date(`${day}T12:00:00Z`), 'UTC', locale) };
    }
    case 'points_expiring': {
      // expiresAt is the start of the shop-local day after the points' last one: the date is that last day.
      const expiresAt = dateOf(data.expiresAt) ?? claimed.created_at;
      return { ...common, points, expiresAt: shopDate(expiresAt), date: shopDate(new Date(expiresAt.getTime() - 1)) };
    }
    case 'points_expired':
      return { ...common, points, date: shopDate(dateOf(data.at) ?? claimed.created_at) };
    case 'tier_reached':
    case 'tier_lost': {
      const tier = typeof data.tier === 'string' ? data.tier : '';
      const tierNow = tier ? `Your tier is now ${tier}.` : 'You hold no tier at the moment.';
      return { ...common, tier, previousTier: String(data.previousTier ?? ''), tierNow };
    }
    case 'referral_reward':
      return { ...common, points, referral: data.referee ? 'for joining with a friend\'s referral code' : 'for referring a friend' };
    case 'birthday':
      return { ...common, points };
  }
}

/** The e-mail for a claimed message in the shop's own template or the built-in one, with its one-click unsubscribe (RFC 8058). */
export async function composeMail(settings: OpenMailSettings, claimed: MailOf, unsubscribeUrl: string): Promise<OutgoingMail> {
  const rendered = await renderMail(claimed.kind, mailVariables(settings, claimed, unsubscribeUrl), settings.templates[claimed.kind]);
  return {
    to: claimed.email,
    ...rendered,
    headers: { 'List-Unsubscribe': `<${unsubscribeUrl}>`, 'List-Unsubscribe-Post': 'List-Unsubscribe=One-Click' },
  };
}

/**
 * What the API's mail fields need: the key that opens the SMTP password, each wait's bound on the
 * server, and what unsubscribe links are made of (a preview shows the customer's real one).
 */
export type MailDeps = { secrets: SecretBox; timeoutMs: number; tokenKey: Buffer; publicUrl: string };

export type MailTestResult = { ok: boolean; response: string; code: number | null; messageId: string | null };

/** The settings' test: one e-mail to `to`, and what the server answered (never thrown: a refusal is the answer). */
export async function sendTestMail(settings: OpenMailSettings, to: string, timeoutMs: number): Promise<MailTestResult> {
  const transport = createMailTransport(settings, { timeoutMs, maxConnections: 1 });
  try {
    const outcome: SendOutcome = await transport.send({
      to,
      subject: `Test e-mail from ${settings.shopName}`,
      text: `This is a test of ${settings.shopName}'s e-mail settings: the server took it.`,
      html: `<p>This is a test of ${escapeHtml(settings.shopName)}'s e-mail settings: the server took it.</p>`,
    });
    return outcome.ok
      ? { ok: true, response: outcome.response, code: Number.parseInt(outcome.response, 10) || null, messageId: outcome.messageId }
      : { ok: false, response: outcome.response, code: outcome.code, messageId: null };
  } finally {
    transport.close();
  }
}

const testInputSchema = z.strictObject({ to: z.email() });

/** shopMailTest: one e-mail through the shop's saved server (switched on or not), and its answer. */
export async function testShopMail(db: Queryable, deps: MailDeps, shopId: string, raw: unknown): Promise<MailTestResult> {
  const { to } = parseInput(testInputSchema, raw);
  const settings = await openMailSettings(db, deps.secrets, shopId);
  if (!settings?.smtpHost || !settings.fromAddress) throw new RuleViolationError('mail_not_configured', 'save an SMTP server and a sender address first (shopMailSettingsUpdate)');
  return sendTestMail(settings, to, deps.timeoutMs);
}

/** A preview's event values where the customer has no e-mail of the kind yet: samples, and the answer says so. */
function sampleData(kind: MailKind, now: Date, timeZone: string): Record<string, unknown> {
  const inDays = (days: number) => new Date(now.getTime() + days * 86_400_000).toISOString();
  switch (kind) {
    case 'reward_issued':
    case 'code_expiring':
      return { code: 'SAMPLE-CODE', value: 5, type: 'amount', expiresAt: inDays(30), pointsAmount: 100 };
    case 'points_earned':
      return { points: 100, day: shopPeriods(now, timeZone).day };
    case 'points_expiring':
      return { points: 100, expiresAt: inDays(7) };
    case 'points_expired':
      return { points: 100, at: now.toISOString() };
    case 'tier_reached':
      return { tier: 'Gold', previousTier: 'Silver' };
    case 'tier_lost':
      return { tier: 'Silver', previousTier: 'Gold' };
    case 'referral_reward':
      return { points: 100, referee: false };
    case 'birthday':
      return { points: 100 };
  }
}

export type MailPreview = RenderedMail & { sample: boolean };

const previewSchema = z.strictObject({ kind: z.enum(MAIL_KINDS), customerId: z.string().min(1).max(100), draft: z.unknown().optional() });

/**
 * mailPreview: the e-mail of `kind` as it would go to the customer now (their address, balance,
 * locale and unsubscribe link), in the shop's template or a `draft` of one (checked as a save is).
 * Its event is the customer's latest e-mail of that kind; without one, sample values (`sample`).
 */
export async function previewMail(db: Queryable, deps: MailDeps, shopId: string, raw: unknown, now: Date): Promise<MailPreview> {
  const { kind, customerId, draft } = parseInput(previewSchema, raw);
  const words = draft === undefined || draft === null ? undefined : parseInput(mailTemplateSchema(kind), draft);
  const customer = await getCustomer(db, shopId, { id: customerId });
  const [shop, settings, templates, preferences, latest] = await Promise.all([
    db.selectFrom('shops').select(['name', 'timezone']).where('id', '=', shopId).executeTakeFirstOrThrow(),
    getMailSettings(db, shopId),
    shopTemplates(db, shopId),
    db.selectFrom('mail_preferences').select('locale').where('customer_id', '=', customer.id).executeTakeFirst(),
    db.selectFrom('mail_messages').select(['data', 'created_at']).where('customer_id', '=', customer.id).where('kind', '=', kind)
      .orderBy('created_at', 'desc').orderBy('id', 'desc').limit(1).executeTakeFirst(),
  ]);
  const mail = {
    kind, email: customer.email, balance: customer.points, locale: preferences?.locale ?? null,
    data: latest?.data ?? sampleData(kind, now, shop.timezone), created_at: latest?.created_at ?? now,
  };
  const variables = mailVariables({ shopName: shop.name, timeZone: shop.timezone, locale: settings.locale }, mail, unsubscribeUrl(deps.publicUrl, deps.tokenKey, shopId, customer.id));
  return { ...(await renderMail(kind, variables, words ?? templates[kind])), sample: latest === undefined };
}
