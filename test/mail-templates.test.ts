import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { formatPoints, formatShopDate, mailVariables, purgeOldMail } from '../src/domain/mail/index.js';
import { startTestApp, type TestApp } from './helpers.js';
import { until } from './live-helpers.js';
import { mailingShop, messagesOf, PUBLIC_URL, redeem, SETTINGS, settled } from './mail-helpers.js';
import { startSmtp, type TestSmtp } from './smtp-server.js';

const UPDATE = `mutation($input: MailTemplateInput!) { mailTemplateUpdate(input: $input) { mailTemplate { kind subject body custom } userErrors { code field message } } }`;
const PREVIEW = `query($kind: MailKind!, $customerId: ID!, $draft: MailTemplateDraft) { mailPreview(kind: $kind, customerId: $customerId, draft: $draft) { subject html text sample } }`;
const PREFS = `mutation($input: CustomerMailPreferencesInput!) { customerMailPreferencesUpdate(input: $input) { mailPreferences { subscribed kindsOff locale suppressed } userErrors { code field message } } }`;
const HISTORY = `query($id: String!, $after: String) { customer(identifier: $id) { _id mailMessages(first: 1, after: $after) { edges { node { kind status attempts sentAt lastError toAddress } } pageInfo { hasNextPage endCursor } } } }`;

const LIFT = 'mutation($a: String!) { mailSuppressionLift(input: { address: $a }) { address userErrors { code field } } }';

const crlf = (s: string) => s.replace(/\r\n/g, '\n').trimEnd();

describe('e-mail templates, preview, locale, preferences and history', () => {
  let t: TestApp;
  let smtp: TestSmtp;

  beforeAll(async () => {
    smtp = await startSmtp();
    t = await startTestApp({ PUBLIC_URL, MAIL_TIMEOUT_MS: '1000' });
  });
  afterAll(async () => {
    await t?.stop();
    await smtp?.close();
  });

  const customerId = async (apiKey: string, id: string) => (await t.graphql(apiKey, '{ customer(identifier: "' + id + '") { _id } }')).data.customer._id as string;
  const arrived = async (before: number, what: string) => {
    await until(() => smtp.received.length > before, 10_000, what);
    return smtp.received.at(-1)!;
  };

  it('sends the shop\'s edited template, escaped in HTML and as written in text, and previews exactly what is sent', async () => {
    const shop = await mailingShop(t, smtp.port);
    await t.customer(shop.shopId, 'ann', 1000);

    const bad = await t.graphql(shop.apiKey, UPDATE, { input: { kind: 'reward_issued', subject: 'Hi {{nickname}}', body: 'Your code: {{code}' } });
    expect(bad.data.mailTemplateUpdate.mailTemplate).toBeNull();
    const problems = bad.data.mailTemplateUpdate.userErrors.map((e: { code: string; field: string[]; message: string }) => [e.code, e.field.join('.'), e.message]);
    expect(problems).toEqual([
      ['validation_error', 'input.subject', expect.stringContaining('unknown variable {{nickname}}')],
      ['validation_error', 'input.body', expect.stringContaining('unbalanced braces')],
    ]);

    const body = 'Dear {{customerName}} <script>alert(1)</script> & co,\n\nHere is **{{reward}}**:\n\n{{code}}\n\nBalance: {{balance}}';
    const saved = await t.graphql(shop.apiKey, UPDATE, { input: { kind: 'reward_issued', subject: 'Code {{code}} for {{customerName}}', body } });
    expect(saved.data.mailTemplateUpdate).toMatchObject({ mailTemplate: { kind: 'reward_issued', custom: true, body }, userErrors: [] });

    const before = smtp.received.length;
    const code = await redeem(t, shop, 'ann');
    const mail = await arrived(before, 'the edited reward e-mail');
    expect(mail.subject).toBe(`Code ${code} for ann`);
    expect(mail.text).toContain('Dear ann <script>alert(1)</script> & co,\n\nHere is 5 off:\n\n    ' + code + '\n\nBalance: 900');
    expect(mail.html).toContain('Dear ann &lt;script&gt;alert(1)&lt;/script&gt; &amp; co,');
    expect(mail.html).not.toContain('<script>');
    expect(mail.html).toContain('Here is <strong>5 off</strong>:');
    expect(mail.html).toContain('white-space:nowrap">' + code);
    // The fixed footer stays: the shop cannot edit the unsubscribe link away.
    expect(mail.html).toContain('href="https://loyalty.example/mail/unsubscribe?token=');

    await until(async () => settled(await messagesOf(t, shop.shopId), 1), 10_000, 'the send to be recorded');
    const ann = await customerId(shop.apiKey, 'ann');
    const preview = (await t.graphql(shop.apiKey, PREVIEW, { kind: 'reward_issued', customerId: ann })).data.mailPreview;
    expect(preview.sample).toBe(false);
    expect(preview.subject).toBe(mail.subject);
    expect(crlf(preview.text)).toBe(crlf(mail.text!));
    expect(crlf(preview.html)).toBe(crlf(mail.html as string));

    // A draft is previewed, not saved; a kind never sent uses samples and says so.
    const draft = (await t.graphql(shop.apiKey, PREVIEW, { kind: 'birthday', customerId: ann, draft: { subject: 'Cake for {{customerName}}', body: '{{points}} points!' } })).data.mailPreview;
    expect(draft).toMatchObject({ subject: 'Cake for ann', sample: true });
    expect(draft.text).toMatch(/^100 points!\n/);
    const wrong = await t.graphql(shop.apiKey, PREVIEW, { kind: 'birthday', customerId: ann, draft: { subject: '{{code}}', body: 'x' } });
    expect(wrong.errors[0].extensions.code).toBe('validation_error');
    // Another shop's customer is not found from this shop.
    const other = await mailingShop(t, smtp.port, 'Other');
    const foreign = await t.graphql(other.apiKey, PREVIEW, { kind: 'birthday', customerId: ann });
    expect(foreign.errors[0].extensions.code).toBe('customer_not_found');

    const reset = await t.graphql(shop.apiKey, 'mutation { mailTemplateReset(kind: reward_issued) { mailTemplate { custom subject } } }');
    expect(reset.data.mailTemplateReset.mailTemplate).toEqual({ custom: false, subject: 'Your reward from {{shopName}}: {{code}}' });
  });

  it.each([
    ['en', 'November 27, 2026', '12,345'],
    ['de', '27. November 2026', '12.345'],
    ['fr', '27 novembre 2026', '12\u202f345'],
    ['ja', '2026年11月27日', '12,345'],
    ['es', '27 de noviembre de 2026', '12.345'],
  ])('writes dates and numbers in %s, the day in the shop\'s time zone', (locale, date, number) => {
    // 23:30 UTC on the 26th is the 27th in Tokyo.
    const at = new Date('2026-11-26T23:30:00Z');
    expect(formatShopDate(at, 'Asia/Tokyo', locale)).toBe(date);
    expect(formatPoints(12_345, locale)).toBe(number);
    const vars = mailVariables({ shopName: 'S', timeZone: 'Asia/Tokyo', locale: 'en' }, { kind: 'points_expired', data: { points: 12_345, at: at.toISOString() }, email: 'a@x.example', balance: 12_345, created_at: at, locale }, 'u');
    expect(vars).toMatchObject({ date, points: number, balance: number });
  });

  it('uses the shop\'s locale, a customer\'s own over it, and refuses a tag Intl cannot write', async () => {
    const shop = await mailingShop(t, smtp.port, 'Locale shop');
    await t.customer(shop.shopId, 'dora', 1000);
    await t.customer(shop.shopId, 'emil', 1000);
    expect((await t.graphql(shop.apiKey, SETTINGS, { input: { locale: 'not a locale' } })).data.shopMailSettingsUpdate.userErrors[0].field).toEqual(['input', 'locale']);
    expect((await t.graphql(shop.apiKey, SETTINGS, { input: { locale: 'de' } })).data.shopMailSettingsUpdate.userErrors).toEqual([]);
    const emil = await customerId(shop.apiKey, 'emil');
    const set = await t.graphql(shop.apiKey, PREFS, { input: { customerId: emil, locale: 'en' } });
    expect(set.data.customerMailPreferencesUpdate.mailPreferences.locale).toBe('en');
    let before = smtp.received.length;
    await redeem(t, shop, 'dora');
    expect((await arrived(before, 'dora\'s e-mail')).text).toMatch(/until \d{1,2}\. \p{L}+ \d{4}\./u);
    before = smtp.received.length;
    await redeem(t, shop, 'emil');
    expect((await arrived(before, 'emil\'s e-mail')).text).toMatch(/until \w+ \d{1,2}, \d{4}\./);
  });

  it('reads and writes preferences through the admin and storefront faces, each customer only their own', async () => {
    const shop = await mailingShop(t, smtp.port, 'Prefs shop');
    await t.customer(shop.shopId, 'fay', 1000);
    await t.customer(shop.shopId, 'gus', 1000);
    const fay = await customerId(shop.apiKey, 'fay');
    const token = async (id: string) =>
      (await t.graphql(shop.apiKey, 'mutation($input: CustomerAccessTokenCreateInput!) { customerAccessTokenCreate(input: $input) { accessToken } }', { input: { customerIdentifier: id } }))
        .data.customerAccessTokenCreate.accessToken as string;
    const sf = async (bearer: string, query: string, variables?: object) =>
      (await (await fetch(`${t.url}/storefront/graphql`, { method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${bearer}` }, body: JSON.stringify({ query, variables }) })).json()) as any;

    const admin = await t.graphql(shop.apiKey, PREFS, { input: { customerId: fay, kindsOff: ['points_earned', 'points_earned'] } });
    expect(admin.data.customerMailPreferencesUpdate).toEqual({ mailPreferences: { subscribed: true, kindsOff: ['points_earned'], locale: null, suppressed: false }, userErrors: [] });
    const audit = await t.app.database.db.selectFrom('audit_log').selectAll().where('shop_id', '=', shop.shopId).where('kind', '=', 'mailPreferences.update').execute();
    expect(audit).toHaveLength(1);

    const fayToken = await token('fay');
    const gusToken = await token('gus');
    expect((await sf(fayToken, '{ me { mailPreferences { subscribed kindsOff } } }')).data.me.mailPreferences).toEqual({ subscribed: true, kindsOff: ['points_earned'] });
    const own = await sf(gusToken, 'mutation { myMailPreferencesUpdate(input: { subscribed: false, locale: "fr" }) { mailPreferences { subscribed locale } userErrors { code } } }');
    expect(own.data.myMailPreferencesUpdate).toEqual({ mailPreferences: { subscribed: false, locale: 'fr' }, userErrors: [] });
    // Gus's change is Gus's: Fay's stay as they were, and the storefront has no way to name another customer.
    expect((await sf(fayToken, '{ me { mailPreferences { subscribed locale } } }')).data.me.mailPreferences).toEqual({ subscribed: true, locale: null });
    expect((await sf(gusToken, '{ me { mailMessages(first: 1) { edges { node { id } } } } }')).errors[0].message).toMatch(/mailMessages/);
    expect((await sf(gusToken, 'mutation { customerMailPreferencesUpdate(input: { customerId: "x" }) { userErrors { code } } }')).errors).toBeDefined();
    const bad = await sf(gusToken, 'mutation { myMailPreferencesUpdate(input: { locale: "zz-" }) { userErrors { code field } } }');
    expect(bad.data.myMailPreferencesUpdate.userErrors).toEqual([{ code: 'validation_error', field: ['input', 'locale'] }]);

    // A kind the customer opted out of is skipped, visibly.
    const before = smtp.recipients.length;
    await redeem(t, shop, 'gus');
    await until(async () => settled(await messagesOf(t, shop.shopId), 1), 10_000, 'gus\'s e-mail to be settled');
    expect((await messagesOf(t, shop.shopId))[0]).toMatchObject({ status: 'skipped', last_error: 'the customer unsubscribed' });
    expect(smtp.recipients.length).toBe(before);

    // Another shop cannot write this shop's customer.
    const other = await t.shop('Stranger');
    const foreign = await t.graphql(other.apiKey, PREFS, { input: { customerId: fay, subscribed: false } });
    expect(foreign.data.customerMailPreferencesUpdate.userErrors[0].code).toBe('customer_not_found');
  });

  it('lifts a suppression, mails the address again, and lists the history newest first until retention purges it', async () => {
    const shop = await mailingShop(t, smtp.port, 'History shop');
    await t.customer(shop.shopId, 'hal', 1000);
    smtp.answerRecipient = (address) => (address === 'hal@example.com' ? { code: 550, message: 'Mailbox unavailable' } : undefined);
    await redeem(t, shop, 'hal');
    await until(async () => settled(await messagesOf(t, shop.shopId), 1), 10_000, 'the refusal');
    smtp.answerRecipient = () => undefined;
    expect((await t.graphql(shop.apiKey, '{ customer(identifier: "hal") { mailPreferences { suppressed } } }')).data.customer.mailPreferences.suppressed).toBe(true);

    await redeem(t, shop, 'hal');
    await until(async () => settled(await messagesOf(t, shop.shopId), 2), 10_000, 'the skip');
    const lift = await t.graphql(shop.apiKey, LIFT, { a: 'HAL@example.com' });
    expect(lift.data.mailSuppressionLift).toEqual({ address: 'hal@example.com', userErrors: [] });
    const again = await t.graphql(shop.apiKey, LIFT, { a: 'hal@example.com' });
    expect(again.data.mailSuppressionLift.userErrors).toEqual([{ code: 'suppression_not_found', field: ['input', 'address'] }]);

    const before = smtp.received.length;
    await redeem(t, shop, 'hal');
    expect((await arrived(before, 'the e-mail after the lift')).to).toBeDefined();
    await until(async () => settled(await messagesOf(t, shop.shopId), 3), 10_000, 'the send');

    const pages: Array<{ kind: string; status: string; attempts: number; sentAt: string | null; lastError: string | null; toAddress: string | null }> = [];
    let after: string | null = null;
    do {
      const res: any = await t.graphql(shop.apiKey, HISTORY, { id: 'hal', after });
      const connection = res.data.customer.mailMessages;
      pages.push(...connection.edges.map((e: { node: (typeof pages)[number] }) => e.node));
      after = connection.pageInfo.hasNextPage ? connection.pageInfo.endCursor : null;
    } while (after);
    expect(pages.map((p) => p.status)).toEqual(['sent', 'skipped', 'suppressed']);
    expect(pages[0]).toMatchObject({ kind: 'reward_issued', attempts: 1, lastError: null, toAddress: 'hal@example.com' });
    expect(pages[0]!.sentAt).not.toBeNull();
    expect(pages[2]!.lastError).toContain('Mailbox unavailable');

    // Retention: settled rows older than the cut go, a queued one stays whatever its age.
    const db = t.app.database.db;
    const [oldest] = await messagesOf(t, shop.shopId);
    await db.updateTable('mail_messages').set({ updated_at: new Date('2020-01-01T00:00:00Z') }).where('shop_id', '=', shop.shopId).execute();
    await db.updateTable('mail_messages').set({ status: 'queued', due_at: new Date('2999-01-01T00:00:00Z') }).where('id', '=', oldest!.id).execute();
    expect(await purgeOldMail(db, new Date('2021-01-01T00:00:00Z'), { batchSize: 1, pauseMs: 0 })).toBe(2);
    expect((await messagesOf(t, shop.shopId)).map((r) => r.id)).toEqual([oldest!.id]);
  });
});
