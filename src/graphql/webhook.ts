import { createSubscription, deleteSubscription, enableSubscription, listSubscriptions, listWebhookTopics, rotateSigningSecret, updateSubscription, type WebhookSubscription as WebhookSubscriptionShape } from '../domain/webhooks/index.js';
import { actorOf, builder } from './builder.js';
import { forwardPageArgs, PAGE_ARGS, toConnection } from './connections.js';
import { markResponseSecret } from './no-store.js';
import { deletePayload, UserError, type UserErrorShape, withUserErrors } from './user-errors.js';

const WebhookTopic = builder.objectRef<{ topic: string; description: string }>('WebhookTopic').implement({
  description: 'A topic of the webhook catalog.',
  fields: (t) => ({
    topic: t.exposeString('topic', { description: '`group/action`; subscriptions may also name `group/*`.' }),
    description: t.exposeString('description'),
  }),
});

const WebhookSubscriptionStatus = builder.enumType('WebhookSubscriptionStatus', {
  description: 'Endpoint health: `probing` after 5 consecutive failures (one attempt at a time until a success); `disabled` after 5 days without a success (nothing attempted, deliveries kept).',
  values: ['enabled', 'probing', 'disabled'] as const,
});

/** The contract's subscription record. It has no secret field: only create and rotate payloads carry one. */
export const WebhookSubscription = builder.objectRef<WebhookSubscriptionShape>('WebhookSubscription').implement({
  description: 'A callback URL that receives the signed events of one topic (or `group/*`).',
  fields: (t) => ({
    id: t.exposeID('id'),
    topic: t.exposeString('topic'),
    callbackUrl: t.exposeString('callbackUrl'),
    previousSecretValidUntil: t.expose('previousSecretValidUntil', {
      type: 'DateTime',
      nullable: true,
      description: 'When the secrets rotated out by the last rotation stop being accepted; null if never rotated.',
    }),
    status: t.expose('status', { type: WebhookSubscriptionStatus }),
    disabledReason: t.exposeString('disabledReason', { nullable: true, description: 'Why it was disabled; null unless disabled.' }),
    createdAt: t.expose('createdAt', { type: 'DateTime' }),
    updatedAt: t.expose('updatedAt', { type: 'DateTime' }),
  }),
});

builder.queryFields((t) => ({
  webhookTopics: t.field({
    type: [WebhookTopic],
    description: 'The topics a webhook subscription can name.',
    resolve: () => listWebhookTopics(),
  }),
  webhookSubscriptions: t.field({
    type: builder.connectionObject({ type: WebhookSubscription, name: 'WebhookSubscriptionConnection' }, { name: 'WebhookSubscriptionEdge' }),
    description: 'The shop\'s webhook subscriptions, newest first.',
    args: PAGE_ARGS,
    resolve: async (_root, args, ctx) => toConnection(await listSubscriptions(ctx.db, ctx.shop.id, forwardPageArgs(args))),
  }),
}));

const WebhookSubscriptionCreateInput = builder.inputType('WebhookSubscriptionCreateInput', {
  fields: (t) => ({
    topic: t.string({ description: 'A catalog topic (webhookTopics) or `group/*`.' }),
    callbackUrl: t.string({ description: 'A public HTTPS URL.' }),
  }),
});

const WebhookSubscriptionUpdateInput = builder.inputType('WebhookSubscriptionUpdateInput', {
  fields: (t) => ({
    id: t.id(),
    callbackUrl: t.string({ description: 'A public HTTPS URL. The topic cannot change: delete and create instead.' }),
  }),
});

const WebhookSubscriptionRotateSecretInput = builder.inputType('WebhookSubscriptionRotateSecretInput', {
  fields: (t) => ({
    id: t.id(),
    graceHours: t.int({
      required: false,
      description: 'Hours (0 to 24, default 24) the secrets in use now stay valid; 0 revokes them at once.',
    }),
  }),
});

const WebhookSubscriptionDeleteInput = builder.inputType('WebhookSubscriptionDeleteInput', {
  fields: (t) => ({ id: t.id() }),
});

const WebhookSubscriptionEnableInput = builder.inputType('WebhookSubscriptionEnableInput', {
  fields: (t) => ({ id: t.id() }),
});

type SubscriptionPayloadShape = { webhookSubscription?: WebhookSubscriptionShape; signingSecret?: string; userErrors: UserErrorShape[] };

function subscriptionPayload(name: string, withSecret: boolean) {
  return builder.objectRef<SubscriptionPayloadShape>(name).implement({
    fields: (t) => ({
      webhookSubscription: t.field({ type: WebhookSubscription, nullable: true, resolve: (p) => p.webhookSubscription ?? null }),
      ...(withSecret
        ? {
            signingSecret: t.string({
              nullable: true,
              description: '64 hexadecimal characters, shown only here: sign-check deliveries with it.',
              resolve: (p) => p.signingSecret ?? null,
            }),
          }
        : {}),
      userErrors: t.field({ type: [UserError], resolve: (p) => p.userErrors }),
    }),
  });
}

/** Splits the domain's secret-bearing record into the payload's subscription and its secret. */
function withSecret({ signingSecret, ...webhookSubscription }: WebhookSubscriptionShape & { signingSecret: string }) {
  return { webhookSubscription, signingSecret };
}

const WebhookSubscriptionCreatePayload = subscriptionPayload('WebhookSubscriptionCreatePayload', true);
const WebhookSubscriptionUpdatePayload = subscriptionPayload('WebhookSubscriptionUpdatePayload', false);
const WebhookSubscriptionRotateSecretPayload = subscriptionPayload('WebhookSubscriptionRotateSecretPayload', true);
const WebhookSubscriptionEnablePayload = subscriptionPayload('WebhookSubscriptionEnablePayload', false);

const WebhookSubscriptionDeletePayload = deletePayload('WebhookSubscriptionDeletePayload', 'deletedWebhookSubscriptionId');

// The GraphQL twins of the REST subscription endpoints; they share those endpoints' rate limits.
// The domain validates every input, so an unknown topic or a refused URL is a userError, as in REST a 400.
builder.mutationFields((t) => ({
  webhookSubscriptionCreate: t.field({
    type: WebhookSubscriptionCreatePayload,
    description: 'Subscribes a public HTTPS URL to a topic; the payload carries the signing secret, once.',
    args: { input: t.arg({ type: WebhookSubscriptionCreateInput, required: true }) },
    resolve: (_root, { input }, ctx) =>
      withUserErrors(async () => {
        const created = withSecret(await createSubscription(ctx.webhooks, ctx.shop.id, input, actorOf(ctx)));
        markResponseSecret(ctx);
        return created;
      }),
  }),
  webhookSubscriptionUpdate: t.field({
    type: WebhookSubscriptionUpdatePayload,
    description: 'Changes the callback URL; topic and signing secret stay.',
    args: { input: t.arg({ type: WebhookSubscriptionUpdateInput, required: true }) },
    resolve: (_root, { input: { id, ...input } }, ctx) =>
      withUserErrors(async () => ({ webhookSubscription: await updateSubscription(ctx.webhooks, ctx.shop.id, String(id), input, actorOf(ctx)) })),
  }),
  webhookSubscriptionRotateSecret: t.field({
    type: WebhookSubscriptionRotateSecretPayload,
    description: 'Issues a new signing secret (in the payload, once); the old one stays valid for graceHours.',
    args: { input: t.arg({ type: WebhookSubscriptionRotateSecretInput, required: true }) },
    resolve: (_root, { input: { id, graceHours } }, ctx) =>
      withUserErrors(async () => {
        const rotated = withSecret(await rotateSigningSecret(ctx.webhooks, ctx.shop.id, String(id), graceHours == null ? {} : { graceHours }, actorOf(ctx)));
        markResponseSecret(ctx);
        return rotated;
      }),
  }),
  webhookSubscriptionEnable: t.field({
    type: WebhookSubscriptionEnablePayload,
    description: 'Re-enables a disabled (or probing) subscription; the deliveries it held are attempted again at once.',
    args: { input: t.arg({ type: WebhookSubscriptionEnableInput, required: true }) },
    resolve: (_root, { input }, ctx) =>
      withUserErrors(async () => ({ webhookSubscription: await enableSubscription(ctx.db, ctx.shop.id, String(input.id), actorOf(ctx)) })),
  }),
  webhookSubscriptionDelete: t.field({
    type: WebhookSubscriptionDeletePayload,
    description: 'Deletes the subscription; its delivery records are kept.',
    args: { input: t.arg({ type: WebhookSubscriptionDeleteInput, required: true }) },
    resolve: (_root, { input }, ctx) =>
      withUserErrors(async () => {
        await deleteSubscription(ctx.db, ctx.shop.id, String(input.id), actorOf(ctx));
        return { deletedId: String(input.id) };
      }),
  }),
}));
