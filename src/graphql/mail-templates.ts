import { listMailTemplates, type MailPreview as MailPreviewShape, type MailTemplate as MailTemplateShape, previewMail, resetMailTemplate, setMailTemplate } from '../domain/mail/index.js';
import { actorOf, builder } from './builder.js';
import { MailKind } from './mail.js';
import { UserError, type UserErrorShape, withUserErrors } from './user-errors.js';

const MailTemplate = builder.objectRef<MailTemplateShape>('MailTemplate').implement({
  description: 'What one kind of e-mail says: the shop\'s own subject and body, or the built-in ones. The layout, the shop\'s name and the unsubscribe footer are fixed.',
  fields: (t) => ({
    kind: t.field({ type: MailKind, resolve: (m) => m.kind }),
    subject: t.exposeString('subject'),
    body: t.exposeString('body', { description: 'Words, not HTML: a blank line starts a paragraph, **words** are bold, a paragraph of {{code}} alone shows the code large.' }),
    custom: t.exposeBoolean('custom', { description: 'Whether the shop edited it (false: the built-in template).' }),
    variables: t.exposeStringList('variables', { description: 'The {{variables}} this kind fills.' }),
    updatedAt: t.expose('updatedAt', { type: 'DateTime', nullable: true }),
  }),
});

const MailPreview = builder.objectRef<MailPreviewShape>('MailPreview').implement({
  description: 'An e-mail rendered as it would be sent to the customer now.',
  fields: (t) => ({
    subject: t.exposeString('subject'),
    html: t.exposeString('html'),
    text: t.exposeString('text'),
    sample: t.exposeBoolean('sample', { description: 'True when the event\'s values (points, code, dates, tiers) are samples: the customer has no e-mail of this kind yet. False: those of their latest one.' }),
  }),
});

const MailTemplateDraft = builder.inputType('MailTemplateDraft', {
  fields: (t) => ({ subject: t.string(), body: t.string() }),
});

builder.queryFields((t) => ({
  mailTemplates: t.field({
    type: [MailTemplate],
    description: 'Every kind\'s template, the shop\'s own or the built-in one.',
    resolve: (_root, _args, ctx) => listMailTemplates(ctx.db, ctx.shop.id),
  }),
  mailPreview: t.field({
    type: MailPreview,
    description: 'The e-mail of `kind` for one of the shop\'s customers, rendered as it would be sent now (their balance, locale, link), in the shop\'s template or `draft`. Errors: validation_error, customer_not_found.',
    args: { kind: t.arg({ type: MailKind, required: true }), customerId: t.arg.id({ required: true }), draft: t.arg({ type: MailTemplateDraft, required: false }) },
    resolve: (_root, args, ctx) => previewMail(ctx.db, ctx.mail, ctx.shop.id, { kind: args.kind, customerId: String(args.customerId), draft: args.draft ?? undefined }, ctx.now()),
  }),
}));

const MailTemplatePayload = builder.objectRef<{ mailTemplate?: MailTemplateShape; userErrors: UserErrorShape[] }>('MailTemplatePayload').implement({
  fields: (t) => ({
    mailTemplate: t.field({ type: MailTemplate, nullable: true, resolve: (p) => p.mailTemplate ?? null }),
    userErrors: t.field({ type: [UserError], resolve: (p) => p.userErrors }),
  }),
});

const MailTemplateInput = builder.inputType('MailTemplateInput', {
  fields: (t) => ({ kind: t.field({ type: MailKind }), subject: t.string(), body: t.string() }),
});

builder.mutationFields((t) => ({
  mailTemplateUpdate: t.field({
    type: MailTemplatePayload,
    description: 'Saves the shop\'s own subject and body for a kind. Errors: validation_error (an unknown variable, a stray brace, a line break in the subject).',
    args: { input: t.arg({ type: MailTemplateInput, required: true }) },
    resolve: (_root, { input }, ctx) => withUserErrors(async () => ({ mailTemplate: await setMailTemplate(ctx.db, ctx.shop.id, input, ctx.now(), actorOf(ctx)) })),
  }),
  mailTemplateReset: t.field({
    type: MailTemplatePayload,
    description: 'Goes back to the built-in template for a kind.',
    args: { kind: t.arg({ type: MailKind, required: true }) },
    resolve: (_root, { kind }, ctx) => withUserErrors(async () => ({ mailTemplate: await resetMailTemplate(ctx.db, ctx.shop.id, kind, ctx.now(), actorOf(ctx)) })),
  }),
}));
