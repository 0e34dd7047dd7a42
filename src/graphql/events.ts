import { GraphQLError } from 'graphql';
import { filter, map, pipe } from 'graphql-yoga';
import { z } from 'zod';
import { getCustomer } from '../domain/customers/index.js';
import { parseInput, topicMatches } from '../domain/kernel/index.js';
import { type Activity as ActivityShape, balanceChangeOf, findActivity } from '../domain/ledger/index.js';
import { isSubscribableTopic } from '../domain/webhooks/index.js';
import type { SubscriptionOwner } from '../events/bus.js';
import type { EventEnvelope } from '../events/outbox-relay.js';
import { Activity } from './activity.js';
import { builder, type GraphQLContext } from './builder.js';

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

/**
 * Who holds a live subscription: the API key (ended when it is revoked), or a person's session over
 * graphql-ws (`session:` ids, as the storefront's are `token:`), whose socket is closed when the
 * session ends. A person's SSE stream would outlive their session (nothing ends it), so it is refused.
 */
function liveOwner(ctx: GraphQLContext): SubscriptionOwner {
  if (ctx.apiKey) return { shopId: ctx.shop.id, apiKeyId: ctx.apiKey.id };
  if (ctx.staff && ctx.overWebSocket) return { shopId: ctx.shop.id, apiKeyId: `session:${ctx.staff.sessionId}` };
  throw new GraphQLError('a signed-in person\'s live events come over graphql-ws (ws(s)://…/graphql with the session cookie), or use an API key', {
    extensions: { code: 'unauthorized' },
  });
}

builder.subscriptionFields((t) => ({
  events: t.field({
    type: Event,
    description: 'The shop\'s events on these topics (catalog topics or `group/*`), as they commit.',
    args: { topics: t.arg.stringList({ required: true }) },
    subscribe: async (_root, args, ctx) => {
      const { topics } = parseInput(eventsArgsSchema, args);
      return ctx.bus.subscribe(liveOwner(ctx), (event) => topics.some((topic) => topicMatches(topic, event.type)));
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
        await ctx.bus.subscribe(liveOwner(ctx), (event) => balanceChangeOf(event)?.customerId === customer.id),
        // Read back from the ledger: the bus carries plain JSON, the Activity type wants Dates.
        map((event: EventEnvelope) => findActivity(ctx.db, ctx.shop.id, balanceChangeOf(event)!.activityId)),
        filter((activity): activity is ActivityShape => activity !== undefined),
      );
    },
    resolve: (change) => change,
  }),
}));
