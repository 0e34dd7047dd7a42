import { existsSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MAIL_KINDS, type MailKind, renderMail } from '../src/domain/mail/index.js';
import { type BrowserSession, openChromium } from './chromium.js';

/**
 * The look test of the e-mails: each kind's HTML part, as the MJML templates render it, opened in
 * Chromium at a phone's width and a desktop's: its words are there and visible, nothing is wider
 * than a phone's screen, and it asks no other site for anything (no web fonts, no trackers).
 * Screenshots go to .test-output/ for a person to look at.
 */
const VARIABLES = {
  shopName: 'Shop <b>&',
  customerName: 'ann',
  email: 'ann@example.com',
  balance: '900',
  code: 'FIVE-ABCDEFGHJK',
  reward: '5 EUR off',
  pointsSpent: '100',
  terms: 'Use it once at checkout, until December 27, 2026.',
  points: '15',
  date: 'November 27, 2026',
  expiresAt: 'December 27, 2026',
  tier: 'Gold',
  previousTier: 'Silver',
  tierNow: 'Your tier is now Bronze.',
  referral: 'for referring a friend',
  unsubscribeUrl: 'https://loyalty.example/mail/unsubscribe?token=u1.x.y',
};

/** What each kind's body says with VARIABLES (besides its greeting and the balance). */
const SAYS: Record<MailKind, string> = {
  reward_issued: 'You redeemed 100 points for 5 EUR off.',
  points_earned: 'On November 27, 2026 you earned 15 points.',
  points_expiring: '15 points of your balance expire after November 27, 2026.',
  points_expired: 'On November 27, 2026, 15 points of your balance expired.',
  code_expiring: 'Use it once at checkout, until December 27, 2026.',
  tier_reached: 'Congratulations: you are now a Gold member.',
  tier_lost: 'You are no longer a Silver member. Your tier is now Bronze.',
  referral_reward: 'You earned 15 points for referring a friend.',
  birthday: 'Happy birthday! We gave you 15 points to celebrate.',
};

describe('the e-mails in Chromium', () => {
  let chromium: BrowserSession;
  beforeAll(async () => {
    chromium = await openChromium();
  });
  afterAll(async () => {
    await chromium?.close();
  });

  it.each(MAIL_KINDS.flatMap((kind) => [375, 800].map((width) => [kind, width] as const)))('%s at %i px', async (kind, width) => {
    const { html, text } = await renderMail(kind, VARIABLES);
    await chromium.page.setViewportSize({ width, height: 900 });
    await chromium.page.setContent(html, { waitUntil: 'load' });
    const body = await chromium.page.locator('body').innerText();
    expect(body).toContain('Shop <b>&'); // escaped in the HTML, so shown as text
    expect(body).toContain('Hi ann,');
    expect(body).toContain('Your balance is now 900 points.');
    expect(body).toContain(SAYS[kind]);
    expect(text).toContain(SAYS[kind]);
    if (kind === 'reward_issued' || kind === 'code_expiring') {
      const code = chromium.page.getByText('FIVE-ABCDEFGHJK', { exact: true });
      await expect(code.isVisible()).resolves.toBe(true);
      // On one line, even on a phone: a code broken at its hyphen is easily copied wrong.
      expect((await code.boundingBox())!.height).toBeLessThan(40);
      expect(text).toContain('    FIVE-ABCDEFGHJK\n');
    }
    const unsubscribe = chromium.page.getByRole('link', { name: 'Unsubscribe' });
    await expect(unsubscribe.getAttribute('href')).resolves.toBe(VARIABLES.unsubscribeUrl);
    // Responsive: nothing wider than the window, on a phone too.
    const scrollWidth = await chromium.page.evaluate(() => document.documentElement.scrollWidth);
    expect(scrollWidth).toBeLessThanOrEqual(width);
    expect(existsSync(await chromium.screenshot(`mail-${kind}-${width}.png`))).toBe(true);
    chromium.expectClean();
  });
});
