import { NotFoundError } from '../domain/kernel/index.js';
import { DELIVERY_STATUSES, getDelivery, listAttemptsOfDeliveries, listDeliveriesPage, payloadsOfDeliveries, requestReplay, type WebhookDelivery as WebhookDeliveryShape, type WebhookDeliveryAttempt as WebhookDeliveryAttemptShape } from '../domain/webhooks/index.js';
import { actorOf, BATCH_ONLY, builder } from './builder.js';
import { forwardPageArgs, PAGE_ARGS, toConnection } from './connections.js';
import { UserError, type UserErrorShape, withUserErrors } from './user-errors.js';

const WebhookDeliveryStatus = builder.enumType('WebhookDeliveryStatus', {
  description: 'pending (not tried yet), sending, succeeded, retrying (a later attempt is scheduled), failed (schedule used up, or 410), cancelled (subscription deleted).',
  values: DELIVERY_STATUSES,
});

const WebhookDeliveryAttemptTrigger = builder.enumType('WebhookDeliveryAttemptTrigger', { values: ['scheduled', 'manual'] as const });

const WebhookDeliveryAttempt = builder.objectRef<WebhookDeliveryAttemptShape>('WebhookDeliveryAttempt').implement({
  description: 'One HTTP attempt of a delivery.',
  fields: (t) => ({
    id: t.exposeID('id'),
    attemptedAt: t.expose('attemptedAt', { type: 'DateTime' }),
    trigger: t.expose('trigger', { type: WebhookDeliveryAttemptTrigger, description: 'scheduled (retry schedule) or manual (replay).' }),
    url: t.exposeString('url'),
    responseStatus: t.exposeInt('responseStatus', { nullable: true, description: 'Null when no response came (timeout, refused, blocked).' }),
    durationMs: t.exposeInt('durationMs'),
    error: t.exposeString('error', { nullable: true }),
    responseBody: t.exposeString('responseBody', { nullable: true, description: 'The first 2 KiB of the response body.' }),
  }),
});

/** A delivery; `attempts` and `payload` are read on demand (the list does not load them), for all of a list's deliveries at once. */
const WebhookDelivery = builder.objectRef<WebhookDeliveryShape>('WebhookDelivery').implement({
  description: 'One event sent to one subscription: its status, retry state and attempts.',
  fields: (t) => ({
    id: t.exposeID('id'),
    subscriptionId: t.exposeID('subscriptionId', { description: 'Kept after the subscription is deleted.' }),
    eventId: t.exposeString('eventId', { description: 'The webhook-id header of every attempt.' }),
    topic: t.exposeString('topic'),
    status: t.expose('status', { type: WebhookDeliveryStatus }),
    attemptCount: t.exposeInt('attemptCount'),
    lastAttemptAt: t.expose('lastAttemptAt', { type: 'DateTime', nullable: true }),
    nextAttemptAt: t.expose('nextAttemptAt', { type: 'DateTime', nullable: true, description: 'The next scheduled attempt, if any.' }),
    lastResponseStatus: t.exposeInt('lastResponseStatus', { nullable: true }),
    lastError: t.exposeString('lastError', { nullable: true }),
    createdAt: t.expose('createdAt', { type: 'DateTime' }),
    updatedAt: t.expose('updatedAt', { type: 'DateTime' }),
    attempts: t.loadableList({
      type: WebhookDeliveryAttempt,
      description: 'Oldest first.',
      loaderOptions: BATCH_ONLY,
      load: (ids: string[], ctx) => listAttemptsOfDeliveries(ctx.db, ctx.shop.id, ids),
      resolve: (d) => d.id,
    }),
    payload: t.loadable({
      type: 'String',
      description: 'The body exactly as signed and sent (minified JSON).',
      loaderOptions: BATCH_ONLY,
      load: (ids: string[], ctx) => payloadsOfDeliveries(ctx.db, ctx.shop.id, ids),
      resolve: (d) => d.id,
    }),
  }),
});

builder.queryFields((t) => ({
  webhookDeliveries: t.field({
    type: builder.connectionObject({ type: WebhookDelivery, name: 'WebhookDeliveryConnection' }, { name: 'WebhookDeliveryEdge' }),
    description: 'The shop\'s webhook deliveries, newest first (those of deleted subscriptions included).',
    args: {
      ...PAGE_ARGS,
      subscriptionId: t.arg.id({ required: false }),
      status: t.arg({ type: WebhookDeliveryStatus, required: false }),
      topic: t.arg.string({ required: false, description: 'A topic, or `group/*`.' }),
    },
    resolve: async (_root, args, ctx) => {
      const filter = { subscriptionId: args.subscriptionId == null ? undefined : String(args.subscriptionId), status: args.status ?? undefined, topic: args.topic ?? undefined };
      return toConnection(await listDeliveriesPage(ctx.db, ctx.shop.id, filter, forwardPageArgs(args)));
    },
  }),
  webhookDelivery: t.field({
    type: WebhookDelivery,
    nullable: true,
    description: 'One delivery with its attempts and payload; null when the shop has no such delivery.',
    args: { id: t.arg.id({ required: true }) },
    resolve: async (_root, { id }, ctx) => {
      try {
        return await getDelivery(ctx.db, ctx.shop.id, String(id));
      } catch (err) {
        if (err instanceof NotFoundError) return null;
        throw err;
      }
    },
  }),
}));

const WebhookDeliveryReplayInput = builder.inputType('WebhookDeliveryReplayInput', { fields: (t) => ({ id: t.id() }) });

const WebhookDeliveryReplayPayload = builder
  .objectRef<{ webhookDelivery?: WebhookDeliveryShape; userErrors: UserErrorShape[] }>('WebhookDeliveryReplayPayload')
  .implement({
    fields: (t) => ({
      webhookDelivery: t.field({ type: WebhookDelivery, nullable: true, resolve: (p) => p.webhookDelivery ?? null }),
      userErrors: t.field({ type: [UserError], resolve: (p) => p.userErrors }),
    }),
  });

builder.mutationFields((t) => ({
  webhookDeliveryReplay: t.field({
    type: WebhookDeliveryReplayPayload,
    description: 'Queues a manual attempt: the same webhook-id, a fresh timestamp, the current URL and secrets (REST: 202).',
    args: { input: t.arg({ type: WebhookDeliveryReplayInput, required: true }) },
    resolve: (_root, { input }, ctx) =>
      withUserErrors(async () => ({ webhookDelivery: await requestReplay(ctx.db, ctx.shop.id, String(input.id), ctx.now(), actorOf(ctx)) })),
  }),
}));
