import type { ClaimedMail } from './queue.js';
import { z } from 'zod';
import type { Queryable } from '../../db/transaction.js';
import { parseInput, RuleViolationError, type SecretBox } from '../kernel/index.js';
import { type OpenMailSettings, openMailSettings } from './settings.js';
import { escapeHtml, formatShopDate, type MailVariables, renderMail } from './templates.js';
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

/** The variables of a message: its customer, its shop, and what its kind is about. */
export function mailVariables(settings: OpenMailSettings, claimed: ClaimedMail, unsubscribeUrl: string): MailVariables {
  const data = (claimed.data ?? {}) as Record<string, unknown>;
  const common = { shopName: settings.shopName, customerName: nameOf(claimed.email), email: claimed.email, balance: String(claimed.balance), unsubscribeUrl };
  const shopDate = (at: Date) => formatShopDate(at, settings.timeZone);
  const points = String(data.points ?? 0);
  switch (claimed.kind) {
    case 'reward_issued':
    case 'code_expiring': {
      const expiresAt = dateOf(data.expiresAt);
      return {
        ...common,
        code: String(data.code ?? ''),
        reward: rewardOf(data),
        pointsSpent: String(data.pointsAmount ?? ''),
        expiresAt: expiresAt ? shopDate(expiresAt) : '',
        terms: `Use it once at checkout${expiresAt ? `, until ${shopDate(expiresAt)}` : ''}.`,
      };
    }
    case 'points_earned': {
      const day = typeof data.day === 'string' ? data.day : claimed.created_at.toISOString().slice(0, 10);
      // The day is a calendar date already: formatted at its noon in UTC, whatever zone, it stays that date.
      return { ...common, points, date: formatShopDate(new Date(`${day}T12:00:00Z`), 'UTC') };
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

/** The e-mail for a claimed message, with its one-click unsubscribe (RFC 8058). */
export async function composeMail(settings: OpenMailSettings, claimed: ClaimedMail, unsubscribeUrl: string): Promise<OutgoingMail> {
  const rendered = await renderMail(claimed.kind, mailVariables(settings, claimed, unsubscribeUrl));
  return {
    to: claimed.email,
    ...rendered,
    headers: { 'List-Unsubscribe': `<${unsubscribeUrl}>`, 'List-Unsubscribe-Post': 'List-Unsubscribe=One-Click' },
  };
}

/** What the API's mail fields need: the key that opens the SMTP password, and each wait's bound on the server. */
export type MailDeps = { secrets: SecretBox; timeoutMs: number };

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
