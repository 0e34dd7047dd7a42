import { filter, map, pipe } from 'graphql-yoga';
import { z } from 'zod';
import { getCustomer } from '../domain/customers/index.js';
import { parseInput, topicMatches } from '../domain/kernel/index.js';
import { type Activity as ActivityShape, balanceChangeOf, findActivity } from '../domain/ledger/index.js';
import { isSubscribableTopic } from '../domain/webhooks/index.js';
import type { EventEnvelope } from '../events/outbox-relay.js';
import { Activity } from './activity.js';
import { adminKey, builder } from './builder.js';

/** The webhook delivery body, as a GraphQL object. */
const Event = builder.objectRef<EventEnvelope>('Event').implement({
  description: 'A committed change: the same envelope a webhook delivery carries.',
  fields: (t) => ({
    id: t.exposeID('id', { description: 'evt_…; the webhook-id of the matching webhook deliveries.' }),
    type: t.exposeString('type', { description: 'The topic, e.g. points/added.' }),
    timestamp: t.field({ type: 'DateTime', resolve: (e) => new Date(e.timestamp) }),
    shopId: t.exposeID('shopId'),
    data: t.field({ type: 'JSON', description: 'The resource after the change (the activity, the redemption, …).', resolve: (e) => e.data }),
  }),
});

/** Built from the ledger entry behind the change. */
const CustomerPointsChange = builder.objectRef<ActivityShape>('CustomerPointsChange').implement({
  description: 'A change of one customer\'s balance.',
  fields: (t) => ({
    customer: t.exposeID('customer', { description: 'The customer `_id`.' }),
    points: t.exposeInt('newPoints', { description: 'The new balance.' }),
    activity: t.field({ type: Activity, description: 'The ledger entry that changed it.', resolve: (activity) => activity }),
  }),
});

// Parsed as the arguments object, so a refusal names the argument: `topics[1]: unknown topic "points/nope"…`.
const eventsArgsSchema = z.object({
  topics: z
    .array(z.string().refine(isSubscribableTopic, { error: (issue) => `unknown topic ${JSON.stringify(issue.input)}: use one from webhookTopics, or <group>/*` }))
    .min(1, 'name at least one topic')
    .max(50),
});

builder.subscriptionFields((t) => ({
  events: t.field({
    type: Event,
    description: 'The shop\'s events on these topics (catalog topics or `group/*`), as they commit.',
    args: { topics: t.arg.stringList({ required: true }) },
    subscribe: async (_root, args, ctx) => {
      const { topics } = parseInput(eventsArgsSchema, args);
      return ctx.bus.subscribe({ shopId: ctx.shop.id, apiKeyId: adminKey(ctx).id }, (event) => topics.some((topic) => topicMatches(topic, event.type)));
    },
    resolve: (event) => event,
  }),
  customerPointsChanged: t.field({
    type: CustomerPointsChange,
    description: 'Every change of this customer\'s balance (points calls, redemptions, referral rewards, imports).',
    args: { identifier: t.arg.string({ required: true, description: 'Shop customer id or e-mail.' }) },
    subscribe: async (_root, args, ctx) => {
      const customer = await getCustomer(ctx.db, ctx.shop.id, args.identifier.trim());
      return pipe(
        await ctx.bus.subscribe({ shopId: ctx.shop.id, apiKeyId: adminKey(ctx).id }, (event) => balanceChangeOf(event)?.customerId === customer.id),
        // Read back from the ledger: the bus carries plain JSON, the Activity type wants Dates.
        map((event: EventEnvelope) => findActivity(ctx.db, ctx.shop.id, balanceChangeOf(event)!.activityId)),
        filter((activity): activity is ActivityShape => activity !== undefined),
      );
    },
    resolve: (change) => change,
  }),
}));
