import {
  getMailSettings, listMailSuppressions, type MailSettings, type MailSuppression as MailSuppressionShape, type MailTestResult, testShopMail,
  updateMailSettings,
} from '../domain/mail/index.js';
import { actorOf, builder, STOREFRONT } from './builder.js';
import { UserError, type UserErrorShape, withUserErrors } from './user-errors.js';

type SettingsShape = MailSettings & { shopId: string };

export const MailKind = builder.enumType('MailKind', {
  subGraphs: STOREFRONT,
  values: {
    reward_issued: { description: 'A redemption issued a discount code: the code and its terms.' },
    points_earned: { description: 'Points earned, one e-mail per customer per shop day at most, summing the day\'s credits, sent after the day ends.' },
    points_expiring: { description: 'Points will expire soon (points/expiring, the shop\'s expiry warningDays before): how many, and their last day.' },
    points_expired: { description: 'Points expired and left the balance (points/expired).' },
    code_expiring: { description: 'A discount code will expire soon, unused (redemptions/expiring, the shop\'s codeWarningDays before): the code and its last day.' },
    tier_reached: { description: 'The customer rose to a higher VIP tier, or reached their first (tiers/changed).' },
    tier_lost: { description: 'The customer fell to a lower VIP tier, or to none (tiers/changed).' },
    referral_reward: { description: 'The referral program rewarded the customer: for referring a friend, or for joining with a friend\'s code.' },
    birthday: { description: 'The birthday rule credited the customer\'s birthday points (then left out of that day\'s points_earned e-mail).' },
  } as const,
});

const SmtpSecurity = builder.enumType('SmtpSecurity', {
  values: {
    tls: { description: 'TLS from the first byte (usually port 465).' },
    starttls: { description: 'Plain connection upgraded with STARTTLS, which is required (usually port 587).' },
    none: { description: 'No TLS at all: only for a server on the same host or network.' },
  } as const,
});

const MailSuppression = builder.objectRef<MailSuppressionShape>('MailSuppression').implement({
  description: 'An address the shop\'s SMTP server refused for good (a 5xx answer to it): no e-mail goes to it any more.',
  fields: (t) => ({
    address: t.exposeString('address'),
    reason: t.exposeString('reason', { description: 'The server\'s answer.' }),
    createdAt: t.expose('createdAt', { type: 'DateTime' }),
  }),
});

const ShopMailSettings = builder.objectRef<SettingsShape>('ShopMailSettings').implement({
  description: 'The shop\'s e-mails to customers: its SMTP server, sender and what it sends. The password is never shown.',
  fields: (t) => ({
    enabled: t.exposeBoolean('enabled', { description: 'Whether e-mails are sent at all.' }),
    smtpHost: t.exposeString('smtpHost'),
    smtpPort: t.exposeInt('smtpPort'),
    smtpSecurity: t.field({ type: SmtpSecurity, resolve: (s) => s.smtpSecurity }),
    smtpUser: t.exposeString('smtpUser', { nullable: true }),
    passwordSet: t.exposeBoolean('passwordSet', { description: 'Whether a password is saved (it is kept encrypted and never returned).' }),
    fromName: t.exposeString('fromName'),
    fromAddress: t.exposeString('fromAddress'),
    kinds: t.field({ type: [MailKind], resolve: (s) => s.kinds, description: 'The e-mails the shop sends.' }),
    locale: t.exposeString('locale', { nullable: true, description: 'The language of dates and numbers in e-mails (BCP 47: en, de, fr-CA, ja…), a customer\'s own overriding it; null: English.' }),
    updatedAt: t.expose('updatedAt', { type: 'DateTime', nullable: true }),
    suppressions: t.field({
      type: [MailSuppression],
      description: 'Addresses the server refused for good, newest first (up to 100).',
      resolve: (s, _args, ctx) => listMailSuppressions(ctx.db, s.shopId),
    }),
  }),
});

builder.queryFields((t) => ({
  shopMailSettings: t.field({
    type: ShopMailSettings,
    description: 'The shop\'s e-mail settings (defaults, switched off, until saved).',
    resolve: async (_root, _args, ctx) => ({ ...(await getMailSettings(ctx.db, ctx.shop.id)), shopId: ctx.shop.id }),
  }),
}));

const ShopMailSettingsInput = builder.inputType('ShopMailSettingsInput', {
  description: 'What to change; a field left out keeps its value.',
  fields: (t) => ({
    enabled: t.boolean({ required: false, description: 'Switching on needs smtpHost and fromAddress.' }),
    smtpHost: t.string({ required: false }),
    smtpPort: t.int({ required: false }),
    smtpSecurity: t.field({ type: SmtpSecurity, required: false }),
    smtpUser: t.string({ required: false }),
    smtpPassword: t.string({ required: false, description: 'A new password; null removes the saved one; left out keeps it.' }),
    fromName: t.string({ required: false }),
    fromAddress: t.string({ required: false }),
    kinds: t.field({ type: [MailKind], required: false }),
    locale: t.string({ required: false, description: 'A BCP 47 language tag; null: English.' }),
  }),
});

const ShopMailSettingsUpdatePayload = builder.objectRef<{ shopMailSettings?: SettingsShape; userErrors: UserErrorShape[] }>('ShopMailSettingsUpdatePayload').implement({
  fields: (t) => ({
    shopMailSettings: t.field({ type: ShopMailSettings, nullable: true, resolve: (p) => p.shopMailSettings ?? null }),
    userErrors: t.field({ type: [UserError], resolve: (p) => p.userErrors }),
  }),
});

const ShopMailTestInput = builder.inputType('ShopMailTestInput', { fields: (t) => ({ to: t.string({ description: 'Where the test e-mail goes.' }) }) });

const ShopMailTestPayload = builder.objectRef<Partial<MailTestResult> & { userErrors: UserErrorShape[] }>('ShopMailTestPayload').implement({
  description: 'What the SMTP server answered to one test e-mail; a refusal or a time-out is an answer, not an error.',
  fields: (t) => ({
    ok: t.boolean({ nullable: true, resolve: (p) => p.ok ?? null, description: 'Whether the server took the e-mail.' }),
    response: t.string({ nullable: true, resolve: (p) => p.response ?? null, description: 'The server\'s last answer, or why none came (a time-out, a refused connection).' }),
    code: t.int({ nullable: true, resolve: (p) => p.code ?? null, description: 'The SMTP reply code, when the server gave one.' }),
    messageId: t.string({ nullable: true, resolve: (p) => p.messageId ?? null }),
    userErrors: t.field({ type: [UserError], resolve: (p) => p.userErrors }),
  }),
});

builder.mutationFields((t) => ({
  shopMailSettingsUpdate: t.field({
    type: ShopMailSettingsUpdatePayload,
    description: 'Changes the shop\'s e-mail settings. Errors: validation_error.',
    args: { input: t.arg({ type: ShopMailSettingsInput, required: true }) },
    resolve: (_root, { input }, ctx) =>
      withUserErrors(async () => {
        // GraphQL's null and "left out" differ only for the password (null removes it); elsewhere null keeps the value.
        const changes = Object.fromEntries(Object.entries(input).filter(([key, value]) => value !== null || key === 'smtpPassword' || key === 'smtpUser' || key === 'locale'));
        return { shopMailSettings: { ...(await updateMailSettings(ctx.db, ctx.mail.secrets, ctx.shop.id, changes, ctx.now(), actorOf(ctx))), shopId: ctx.shop.id } };
      }),
  }),
  shopMailTest: t.field({
    type: ShopMailTestPayload,
    description: 'Sends one test e-mail through the saved SMTP server (switched on or not) and reports its answer. Errors: validation_error, mail_not_configured.',
    args: { input: t.arg({ type: ShopMailTestInput, required: true }) },
    resolve: (_root, { input }, ctx) => withUserErrors(() => testShopMail(ctx.db, ctx.mail, ctx.shop.id, input)),
  }),
}));
