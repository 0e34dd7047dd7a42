import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MAIL_KINDS } from '../src/domain/mail/index.js';
import { movableClock, onPostgres, startTestApp, type TestApp, withTwoInstances } from './helpers.js';
import { until } from './live-helpers.js';
import { mailingShop, messagesOf, PUBLIC_URL, rawHeader, redeem, requeue, SETTINGS, settled, unsubscribeLink } from './mail-helpers.js';
import { startHungSmtp, startSmtp, type TestSmtp } from './smtp-server.js';

const TEST = `mutation($input: ShopMailTestInput!) { shopMailTest(input: $input) { ok code response messageId userErrors { code field message } } }`;

describe('e-mails to customers', () => {
  let t: TestApp;
  let smtp: TestSmtp;
  const clock = movableClock();

  beforeAll(async () => {
    smtp = await startSmtp();
    t = await startTestApp({ PUBLIC_URL, MAIL_TIMEOUT_MS: '1000' }, { clock: clock.now });
  });
  afterAll(async () => {
    await t?.stop();
    await smtp?.close();
  });

  it('keeps the settings with the password sealed and never returned', async () => {
    const shop = await mailingShop(t, smtp.port);
    const read = await t.graphql(shop.apiKey, '{ shopMailSettings { enabled smtpHost smtpPort smtpSecurity smtpUser passwordSet fromAddress kinds suppressions { address } } }');
    expect(read.data.shopMailSettings).toEqual({
      enabled: true, smtpHost: '127.0.0.1', smtpPort: smtp.port, smtpSecurity: 'none', smtpUser: 'mailer', passwordSet: true, fromAddress: 'rewards@shop.example',
      kinds: [...MAIL_KINDS], suppressions: [],
    });
    const row = await t.app.database.db.selectFrom('shop_mail_settings').selectAll().where('shop_id', '=', shop.shopId).executeTakeFirstOrThrow();
    expect(row.smtp_password_sealed).toMatch(/^v1:/);
    expect(row.smtp_password_sealed).not.toContain('hunter2');
    // The schema has no field that could show it.
    const asked = await t.graphql(shop.apiKey, '{ shopMailSettings { smtpPassword } }');
    expect(asked.errors[0].message).toMatch(/smtpPassword/);

    const bad = await t.graphql(shop.apiKey, SETTINGS, { input: { smtpPort: 0, fromAddress: 'not an address' } });
    expect(bad.data.shopMailSettingsUpdate.shopMailSettings).toBeNull();
    expect(bad.data.shopMailSettingsUpdate.userErrors.map((e: { field: string[] }) => e.field.join('.')).sort()).toEqual(['input.fromAddress', 'input.smtpPort']);
    const other = await t.shop('Another');
    const blank = await t.graphql(other.apiKey, SETTINGS, { input: { enabled: true } });
    expect(blank.data.shopMailSettingsUpdate.userErrors[0].code).toBe('validation_error');
    // Another shop sees its own defaults, nothing of the first's.
    const theirs = await t.graphql(other.apiKey, '{ shopMailSettings { enabled smtpHost passwordSet } }');
    expect(theirs.data.shopMailSettings).toEqual({ enabled: false, smtpHost: '', passwordSet: false });
  });

  it('sends one reward e-mail per redemption: headers, both parts, variables escaped in HTML', async () => {
    const shop = await mailingShop(t, smtp.port);
    await t.customer(shop.shopId, 'ann', 1000);
    const before = smtp.received.length;
    const code = await redeem(t, shop, 'ann');
    await until(() => smtp.received.length > before, 10_000, 'the reward e-mail');
    const mail = smtp.received.at(-1)!;
    expect(mail.from?.value).toEqual([{ name: 'Rewards team', address: 'rewards@shop.example' }]);
    expect(mail.to && !Array.isArray(mail.to) ? mail.to.value : []).toEqual([{ name: '', address: 'ann@example.com' }]);
    expect(mail.subject).toBe(`Your reward from Shop <b>&: ${code}`);
    expect(rawHeader(mail, 'List-Unsubscribe-Post')).toBe('List-Unsubscribe=One-Click');
    unsubscribeLink(t, mail);
    expect(mail.text).toContain(`    ${code}\n`);
    expect(mail.text).toContain('You redeemed 100 points for 5 off.');
    expect(mail.text).toContain('Your balance is now 900 points.');
    expect(mail.text).toMatch(/Use it once at checkout, until \w+ \d+, \d{4}\./);
    expect(mail.html).toContain(code);
    expect(mail.html).toContain('Shop &lt;b&gt;&amp;');
    expect(mail.html).not.toContain('Shop <b>');
    expect(mail.html).toContain('href="https://loyalty.example/mail/unsubscribe?token=');

    // The server's answer is recorded once it came.
    await until(async () => (await messagesOf(t, shop.shopId))[0]?.status === 'sent', 10_000, 'the record of the send');
    const [row] = await messagesOf(t, shop.shopId);
    expect(row).toMatchObject({ kind: 'reward_issued', status: 'sent', attempts: 1, to_address: 'ann@example.com', due_at: null, last_error: null });
    expect(row!.message_id).toBe(mail.messageId);
  });

  it('unsubscribes over HTTP without signing in, and sends that customer nothing more', async () => {
    const shop = await mailingShop(t, smtp.port);
    await t.customer(shop.shopId, 'ben', 1000);
    const before = smtp.received.length;
    await redeem(t, shop, 'ben');
    await until(() => smtp.received.length > before, 10_000, 'the reward e-mail');
    const link = unsubscribeLink(t, smtp.received.at(-1)!);

    const page = await fetch(link);
    expect(page.status).toBe(200);
    expect(page.headers.get('content-type')).toMatch(/text\/html/);
    expect(await page.text()).toContain('<form method="post"');
    // Looking at the page unsubscribes no one.
    expect(await t.app.database.db.selectFrom('mail_preferences').selectAll().execute()).toHaveLength(0);

    // RFC 8058's one-click POST, as a mail client sends it.
    const click = await fetch(link, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: 'List-Unsubscribe=One-Click' });
    expect(click.status).toBe(200);
    expect(await click.text()).toContain('You are unsubscribed');

    const forged = await fetch(link.replace(/token=([^&]+)/, (_, token: string) => `token=${token.slice(0, -2)}xx`), { method: 'POST' });
    expect(forged.status).toBe(400);
    expect((await fetch(`${t.url}/mail/unsubscribe`)).status).toBe(400);

    await redeem(t, shop, 'ben');
    await until(async () => settled(await messagesOf(t, shop.shopId), 2), 10_000, 'the second e-mail to be settled');
    const rows = await messagesOf(t, shop.shopId);
    expect(rows.map((r) => r.status)).toEqual(['sent', 'skipped']);
    expect(rows[1]!.last_error).toBe('the customer unsubscribed');
    expect(smtp.recipients.filter((r) => r === 'ben@example.com')).toHaveLength(1);
  });

  it('tests the settings and reports the server\'s answer as data', async () => {
    const shop = await mailingShop(t, smtp.port);
    const ok = await t.graphql(shop.apiKey, TEST, { input: { to: 'owner@shop.example' } });
    expect(ok.data.shopMailTest).toMatchObject({ ok: true, code: 250, userErrors: [] });
    expect(smtp.received.at(-1)!.subject).toBe('Test e-mail from Shop <b>&');

    smtp.answerRecipient = (address) => (address === 'nobody@shop.example' ? { code: 550, message: 'No such user here' } : undefined);
    const refused = await t.graphql(shop.apiKey, TEST, { input: { to: 'nobody@shop.example' } });
    smtp.answerRecipient = () => undefined;
    expect(refused.errors).toBeUndefined();
    expect(refused.data.shopMailTest).toMatchObject({ ok: false, code: 550, messageId: null, userErrors: [] });
    expect(refused.data.shopMailTest.response).toContain('No such user here');

    const invalid = await t.graphql(shop.apiKey, TEST, { input: { to: 'not an address' } });
    expect(invalid.data.shopMailTest.userErrors[0]).toMatchObject({ code: 'validation_error', field: ['input', 'to'] });
    const unconfigured = await t.shop('No mail');
    const none = await t.graphql(unconfigured.apiKey, TEST, { input: { to: 'owner@shop.example' } });
    expect(none.data.shopMailTest.userErrors[0].code).toBe('mail_not_configured');
  });

  it('retries a temporary refusal with backoff; a permanent one suppresses the address, visibly', async () => {
    const shop = await mailingShop(t, smtp.port);
    await t.customer(shop.shopId, 'cy', 1000);
    await t.customer(shop.shopId, 'dee', 1000);
    let refusals = 0;
    smtp.answerRecipient = (address) => {
      if (address === 'cy@example.com' && refusals++ === 0) return { code: 451, message: 'Try again later' };
      if (address === 'dee@example.com') return { code: 550, message: 'Mailbox unavailable' };
      return undefined;
    };
    try {
      await redeem(t, shop, 'cy');
      await until(async () => Boolean((await messagesOf(t, shop.shopId))[0]?.last_error), 10_000, 'the first try');
      const [waiting] = await messagesOf(t, shop.shopId);
      expect(waiting).toMatchObject({ status: 'queued', attempts: 1 });
      expect(waiting!.last_error).toContain('Try again later');
      // Due again after the first backoff (10 s), not before.
      expect(waiting!.due_at!.getTime() - waiting!.updated_at.getTime()).toBeGreaterThanOrEqual(9_000);
      clock.moveTo(new Date(waiting!.due_at!.getTime() + 1));
      await until(async () => (await messagesOf(t, shop.shopId))[0]?.status === 'sent', 10_000, 'the retry');
      expect((await messagesOf(t, shop.shopId))[0]).toMatchObject({ status: 'sent', attempts: 2, last_error: null });

      await redeem(t, shop, 'dee');
      await until(async () => settled(await messagesOf(t, shop.shopId), 2), 10_000, 'the refused e-mail');
      expect((await messagesOf(t, shop.shopId))[1]).toMatchObject({ status: 'suppressed', attempts: 1, to_address: 'dee@example.com' });
      const settings = await t.graphql(shop.apiKey, '{ shopMailSettings { suppressions { address reason } } }');
      expect(settings.data.shopMailSettings.suppressions).toEqual([{ address: 'dee@example.com', reason: expect.stringContaining('Mailbox unavailable') }]);

      // The next e-mail to that address is not even tried.
      await redeem(t, shop, 'dee');
      await until(async () => settled(await messagesOf(t, shop.shopId), 3), 10_000, 'the next e-mail');
      expect((await messagesOf(t, shop.shopId))[2]).toMatchObject({ status: 'skipped', last_error: expect.stringContaining('suppressed') });
      expect(smtp.recipients.filter((r) => r === 'dee@example.com')).toHaveLength(0);
    } finally {
      smtp.answerRecipient = () => undefined;
    }
  });

  it('sums a day\'s points in one e-mail per customer, sent once the shop\'s day is over', async () => {
    const shop = await mailingShop(t, smtp.port, 'Daily');
    await t.customer(shop.shopId, 'gus', 0);
    const rule = await t.graphql(shop.apiKey, 'mutation($input: EarningRuleCreateInput!) { earningRuleCreate(input: $input) { userErrors { message } } }', {
      input: { type: 'custom', name: 'Share', earnPoint: 5, action: 'share', actionLimit: 'unlimited' },
    });
    expect(rule.data.earningRuleCreate.userErrors).toEqual([]);
    for (const reference of ['p-1', 'p-2', 'p-3']) {
      const res = await t.post('/rest-api/v1/actions', { customerIdentifier: 'gus', action: 'share', reference }, shop.apiKey);
      expect(res.status).toBe(201);
    }
    const pointsQueued = async () => ((await messagesOf(t, shop.shopId))[0]?.data as { points?: number } | undefined)?.points;
    await until(async () => (await pointsQueued()) === 15, 10_000, 'the day\'s sum');
    const [row] = await messagesOf(t, shop.shopId);
    expect(row).toMatchObject({ kind: 'points_earned', status: 'queued', attempts: 0 });
    expect(row!.source).toMatch(/^day:\d{4}-\d{2}-\d{2}$/);
    expect(row!.due_at!.getTime()).toBeGreaterThan(Date.now());
    const before = smtp.recipients.length;
    clock.moveTo(new Date(row!.due_at!.getTime() + 1));
    await until(() => smtp.recipients.length > before, 10_000, 'the day\'s e-mail');
    const mail = smtp.received.at(-1)!;
    expect(mail.subject).toBe('You earned 15 points at Daily');
    expect(mail.text).toContain('you earned 15 points.');
    expect(mail.text).toContain('Your balance is now 15 points.');
    await until(async () => (await messagesOf(t, shop.shopId))[0]?.status === 'sent', 10_000, 'the record of the send');
    expect(await messagesOf(t, shop.shopId)).toHaveLength(1);
  });

  it('a shop whose SMTP server hangs delays no other shop\'s mail (bounded waits)', async () => {
    const hung = await startHungSmtp();
    try {
      const stuck = await mailingShop(t, hung.port, 'Stuck');
      const healthy = await mailingShop(t, smtp.port, 'Healthy');
      await t.customer(stuck.shopId, 'eve', 1000);
      await t.customer(healthy.shopId, 'fay', 1000);
      await redeem(t, stuck, 'eve');
      await until(() => hung.connections() > 0, 10_000, 'the hung server to be dialled');
      const started = Date.now();
      const before = smtp.recipients.length;
      await redeem(t, healthy, 'fay');
      await until(() => smtp.recipients.length > before, 10_000, 'the healthy shop\'s e-mail');
      // The hung shop's send waits out its 1 s greeting time-out; the other shop's does not wait for it.
      expect(Date.now() - started).toBeLessThan(900);
      await until(async () => Boolean((await messagesOf(t, stuck.shopId))[0]?.last_error), 10_000, 'the hung send to time out');
      const [row] = await messagesOf(t, stuck.shopId);
      expect(row).toMatchObject({ status: 'queued', attempts: 1 });
      expect(row!.last_error).toMatch(/greeting|timeout/i);
    } finally {
      await hung.close();
    }
  });
});

describe.runIf(onPostgres)('e-mails on two instances (PostgreSQL)', () => {
  it('sends each reward e-mail exactly once, even when an event is queued twice', async () => {
    const smtp = await startSmtp();
    try {
      await withTwoInstances(async (a, b) => {
        const shop = await mailingShop(a, smtp.port);
        for (let i = 0; i < 10; i++) await a.customer(shop.shopId, `c${i}`, 1000);
        a.app.startWorker();
        b.app.startWorker();
        const codes = await Promise.all(Array.from({ length: 20 }, (_, i) => redeem(i % 2 ? a : b, shop, `c${i % 10}`)));
        await until(() => smtp.received.length >= 20, 20_000, 'twenty e-mails');
        // An event relayed again (a second queueing of the same batch) adds nothing.
        await requeue(a, shop.shopId, 'redemptions/created');
        await new Promise((r) => setTimeout(r, 1500));
        expect(smtp.received).toHaveLength(20);
        expect(new Set(smtp.received.map((m) => m.subject)).size).toBe(20);
        for (const code of codes) expect(smtp.received.filter((m) => m.subject?.endsWith(code))).toHaveLength(1);
        const rows = await messagesOf(a, shop.shopId);
        expect(rows).toHaveLength(20);
        expect(rows.every((r) => r.status === 'sent' && r.attempts === 1)).toBe(true);
      });
    } finally {
      await smtp.close();
    }
  });
});
