import type { FastifyReply, FastifyRequest } from 'fastify';
import { GraphQLError } from 'graphql';
import { createYoga, maskError } from 'graphql-yoga';
import { renderGraphiQL } from '@graphql-yoga/render-graphiql';
import { databaseBusy } from '../db/busy.js';
import type { DB } from '../db/database.js';
import type { EventBus } from '../events/bus.js';
import { DomainError, ValidationError } from '../domain/errors.js';
import type { Logger } from '../logger.js';
import type { WebhookSubscriptionDeps } from '../domain/webhook-subscriptions.js';
import type { RateLimiter } from '../rate-limit/limiter.js';
import type { GraphQLContext } from './builder.js';
import { useRateLimits } from './rate-limit.js';
import { useRequestChecks } from './request-checks.js';
import { schema } from './schema.js';

/** Over HTTP Fastify's request and reply; over graphql-ws only the shop the connection authenticated. */
export type ServerContext = { req: Pick<FastifyRequest, 'shop'>; reply?: FastifyReply };

export const EXAMPLE_OPERATIONS = `# Loyalty GraphQL. Also here: the REST reference at /docs, live events at /dashboard.
# Add your API key under Headers: {"Authorization": "Bearer lk_..."}, then pick an operation to run.
query Customer {
  customer(identifier: "demo-1001") {
    email
    points
    activities(first: 5) { edges { node { _id type oldPoints newPoints createdAt } } }
  }
}

query RedeemableRewards {
  pointsRedemptions(customerIdentifier: "demo-1001", first: 10) {
    edges { node { _id name type rewardValue discountValue redeemable } }
  }
}

mutation AddPoints {
  pointsAdd(input: { customerIdentifier: "demo-1001", amount: 10, description: "GraphiQL" }) {
    activity { _id oldPoints newPoints }
    userErrors { code field message }
  }
}

# rewardId: an _id from RedeemableRewards
mutation Redeem {
  pointsRedeem(input: { customerIdentifier: "demo-1001", rewardId: "<_id>", pointsAmount: 100 }) {
    discountCode { code value type expiresAt }
    customer { points }
    userErrors { code field message }
  }
}

# Runs until stopped; add or redeem points meanwhile to see events arrive.
subscription PointsEvents {
  events(topics: ["points/*", "redemptions/created"]) { id type timestamp data }
}
`;

export function unauthenticatedError(): GraphQLError {
  return new GraphQLError('a valid API key is required: Authorization: Bearer <key>', {
    extensions: { code: 'unauthorized', http: { status: 401, headers: { 'www-authenticate': 'Bearer' } } },
  });
}

/** Yoga over the Pothos schema; Fastify authenticates, Yoga turns the shop into the context. */
export function createGraphQLServer(db: DB, logger: Logger, services: { rateLimiter: RateLimiter; webhooks: WebhookSubscriptionDeps; bus: EventBus }) {
  return createYoga<ServerContext, GraphQLContext>({
    schema,
    graphqlEndpoint: '/graphql',
    plugins: [useRequestChecks(), useRateLimits(services.rateLimiter)],
    logging: {
      debug: (...args) => logger.debug(args.map(String).join(' ')),
      info: (...args) => logger.info(args.map(String).join(' ')),
      warn: (...args) => logger.warn(args.map(String).join(' ')),
      error: (...args) => logger.error({ err: args.find((a) => a instanceof Error) }, args.map(String).join(' ')),
    },
    graphiql: { defaultQuery: EXAMPLE_OPERATIONS, title: 'Loyalty GraphQL · REST reference at /docs · live events at /dashboard' },
    // GraphiQL bundled into the page: nothing loaded from a CDN.
    renderGraphiQL,
    landingPage: false,
    context: ({ req }) => {
      if (!req.shop) throw unauthenticatedError();
      return { db, shop: req.shop, webhooks: services.webhooks, bus: services.bus };
    },
    maskedErrors: {
      // Domain errors are meant for clients and carry the REST error code; the rest stays masked.
      maskError(error, message, isDev) {
        const original = error instanceof GraphQLError ? error.originalError : error;
        if (original instanceof DomainError && error instanceof GraphQLError) {
          return new GraphQLError(original.message, {
            nodes: error.nodes,
            path: error.path,
            extensions: {
              code: original.code,
              ...(original instanceof ValidationError ? { details: original.details } : {}),
            },
          });
        }
        // As over REST: a shed request or an unreachable database is a 503 with Retry-After, not a masked 500.
        const busy = databaseBusy(original);
        if (busy) {
          return new GraphQLError(busy.message, {
            extensions: { code: busy.code, http: { status: 503, headers: { 'retry-after': String(busy.retryAfterSec) } } },
          });
        }
        return maskError(error, message, isDev);
      },
    },
  });
}
