import {
  getMailPreferences, liftMailSuppression, listCustomerMail, type MailPreferences as MailPreferencesShape, type MailRecord, updateMailPreferences,
} from '../domain/mail/index.js';
import { actorOf, builder, type GraphQLContext, STOREFRONT, tokenHolder } from './builder.js';
import { forwardPageArgs, PAGE_ARGS, toConnection } from './connections.js';
import { Customer } from './customer.js';
import { MailKind } from './mail.js';
import { UserError, type UserErrorShape, withUserErrors } from './user-errors.js';

const MailPreferences = builder.objectRef<MailPreferencesShape>('MailPreferences').implement({
  subGraphs: STOREFRONT,
  description: 'Which of the shop\'s e-mails the customer wants, and in which language.',
  fields: (t) => ({
    subscribed: t.exposeBoolean('subscribed', { description: 'False once the customer unsubscribed: no e-mail at all.' }),
    unsubscribedAt: t.expose('unsubscribedAt', { type: 'DateTime', nullable: true }),
    kindsOff: t.field({ type: [MailKind], resolve: (p) => p.kindsOff, description: 'The kinds the customer opted out of.' }),
    locale: t.exposeString('locale', { nullable: true, description: 'The customer\'s language for dates and numbers (BCP 47); null: the shop\'s.' }),
    suppressed: t.exposeBoolean('suppressed', { description: 'Whether the shop\'s server refused the address for good (the shop lifts it with mailSuppressionLift).' }),
  }),
});

const MailStatus = builder.enumType('MailStatus', {
  values: {
    queued: { description: 'Waiting, being sent or retrying (see attempts and lastError).' },
    sent: { description: 'The server took it.' },
    failed: { description: 'Refused for good, or out of tries.' },
    suppressed: { description: 'The server refused the address for good.' },
    skipped: { description: 'Not sent: unsubscribed, opted out, suppressed address, or the shop stopped sending the kind (lastError says which).' },
  } as const,
});

const MailMessage = builder.objectRef<MailRecord>('MailMessage').implement({
  description: 'One e-mail to a customer: what, its state, when and how it went.',
  fields: (t) => ({
    id: t.exposeID('id'),
    kind: t.field({ type: MailKind, resolve: (m) => m.kind }),
    status: t.field({ type: MailStatus, resolve: (m) => m.status }),
    toAddress: t.exposeString('toAddress', { nullable: true, description: 'Where it went (set once sent or refused).' }),
    attempts: t.exposeInt('attempts'),
    lastError: t.exposeString('lastError', { nullable: true, description: 'The server\'s last answer to a failed try, or why it was skipped.' }),
    createdAt: t.expose('createdAt', { type: 'DateTime' }),
    sentAt: t.expose('sentAt', { type: 'DateTime', nullable: true }),
    dueAt: t.expose('dueAt', { type: 'DateTime', nullable: true, description: 'Queued: when it is (next) due; null once settled.' }),
  }),
});

const MailMessageConnection = builder.connectionObject({ type: MailMessage, name: 'MailMessageConnection' }, { name: 'MailMessageEdge' });

builder.objectFields(Customer, (t) => ({
  mailPreferences: t.field({
    subGraphs: STOREFRONT,
    type: MailPreferences,
    description: 'The customer\'s e-mail preferences.',
    resolve: (customer, _args, ctx) => getMailPreferences(ctx.db, ctx.shop.id, customer._id),
  }),
  mailMessages: t.field({
    subGraphs: ['admin'],
    type: MailMessageConnection,
    description: 'The e-mails queued for the customer, newest first (kept MAIL_RETENTION_DAYS once settled).',
    args: PAGE_ARGS,
    resolve: async (customer, args, ctx) => toConnection(await listCustomerMail(ctx.db, ctx.shop.id, customer._id, forwardPageArgs(args))),
  }),
}));

const preferenceFields = {
  subscribed: { description: 'False unsubscribes from every e-mail; true subscribes again.' },
  kindsOff: { description: 'The kinds not to send (replaces the list).' },
  locale: { description: 'A BCP 47 language tag; null: the shop\'s.' },
};

const CustomerMailPreferencesInput = builder.inputType('CustomerMailPreferencesInput', {
  description: 'What to change; a field left out keeps its value.',
  fields: (t) => ({
    customerId: t.id(),
    subscribed: t.boolean({ required: false, ...preferenceFields.subscribed }),
    kindsOff: t.field({ type: [MailKind], required: false, ...preferenceFields.kindsOff }),
    locale: t.string({ required: false, ...preferenceFields.locale }),
  }),
});

const MyMailPreferencesInput = builder.inputType('MyMailPreferencesInput', {
  subGraphs: ['storefront'],
  description: 'What to change; a field left out keeps its value.',
  fields: (t) => ({
    subscribed: t.boolean({ required: false, ...preferenceFields.subscribed }),
    kindsOff: t.field({ type: [MailKind], required: false, ...preferenceFields.kindsOff }),
    locale: t.string({ required: false, ...preferenceFields.locale }),
  }),
});

const MailPreferencesPayload = builder.objectRef<{ mailPreferences?: MailPreferencesShape; userErrors: UserErrorShape[] }>('MailPreferencesPayload').implement({
  subGraphs: STOREFRONT,
  fields: (t) => ({
    mailPreferences: t.field({ type: MailPreferences, nullable: true, resolve: (p) => p.mailPreferences ?? null }),
    userErrors: t.field({ type: [UserError], resolve: (p) => p.userErrors }),
  }),
});

const MailSuppressionLiftInput = builder.inputType('MailSuppressionLiftInput', { fields: (t) => ({ address: t.string({ description: 'The suppressed address (any case).' }) }) });

const MailSuppressionLiftPayload = builder.objectRef<{ address?: string; userErrors: UserErrorShape[] }>('MailSuppressionLiftPayload').implement({
  fields: (t) => ({
    address: t.string({ nullable: true, resolve: (p) => p.address ?? null, description: 'The address mailed again.' }),
    userErrors: t.field({ type: [UserError], resolve: (p) => p.userErrors }),
  }),
});

/** GraphQL's null keeps a value, except the locale's (null: back to the shop's). */
const changes = (input: Record<string, unknown>) => Object.fromEntries(Object.entries(input).filter(([key, value]) => value !== null || key === 'locale'));

const update = (ctx: GraphQLContext, customerId: string, input: Record<string, unknown>, staff: boolean) =>
  withUserErrors(async () => ({ mailPreferences: await updateMailPreferences(ctx.db, ctx.shop.id, customerId, changes(input), ctx.now(), staff ? actorOf(ctx) : undefined) }));

builder.mutationFields((t) => ({
  customerMailPreferencesUpdate: t.field({
    type: MailPreferencesPayload,
    description: 'Changes a customer\'s e-mail preferences. Errors: validation_error, customer_not_found.',
    args: { input: t.arg({ type: CustomerMailPreferencesInput, required: true }) },
    resolve: (_root, { input: { customerId, ...rest } }, ctx) => update(ctx, String(customerId), rest, true),
  }),
  myMailPreferencesUpdate: t.field({
    subGraphs: ['storefront'],
    type: MailPreferencesPayload,
    description: 'Changes this customer\'s own e-mail preferences. Errors: validation_error.',
    args: { input: t.arg({ type: MyMailPreferencesInput, required: true }) },
    resolve: (_root, { input }, ctx) => update(ctx, tokenHolder(ctx).customerId, input, false),
  }),
  mailSuppressionLift: t.field({
    type: MailSuppressionLiftPayload,
    description: 'Mails a suppressed address again (its owner fixed their mailbox). Errors: validation_error, suppression_not_found.',
    args: { input: t.arg({ type: MailSuppressionLiftInput, required: true }) },
    resolve: (_root, { input }, ctx) => withUserErrors(() => liftMailSuppression(ctx.db, ctx.shop.id, input.address, ctx.now(), actorOf(ctx))),
  }),
}));
