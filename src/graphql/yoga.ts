import { type ExecutionResult, GraphQLError } from 'graphql';
import { type CompiledQuery, compileQuery, isCompiledQuery } from 'graphql-jit';
import { createYoga, maskError, type Plugin } from 'graphql-yoga';
import { databaseBusy } from '../db/busy.js';
import type { DB } from '../db/database.js';
import { DomainError, ValidationError } from '../domain/kernel/index.js';
import type { WebhookSubscriptionDeps } from '../domain/webhooks/index.js';
import type { EventBus } from '../events/bus.js';
import type { ShopifyAdmin } from '../shopify-admin/connect.js';
import type { MailDeps } from '../domain/mail/index.js';
import type { Logger } from '../logger.js';
import type { RateLimiter } from '../rate-limit/limiter.js';
import type { StorefrontLimiter } from '../rate-limit/storefront.js';
import type { GraphQLContext, ServerContext } from './builder.js';
import { useHeavyOperationQueue } from './heavy-operations.js';
import { useLimits } from './limits.js';
import { perOperation } from './per-operation.js';
import { useRateLimits, useStorefrontRateLimits } from './rate-limit.js';
import { useRequestChecks } from './request-checks.js';
import { useStaffRoles } from './roles.js';
import { schema, storefrontSchema } from './schema.js';

/** The two GraphQL faces: one builder, two schemas (builder.ts). */
export type Face = 'admin' | 'storefront';

export const STOREFRONT_ENDPOINT = '/storefront/graphql';

export function unauthenticatedError(face: Face = 'admin'): GraphQLError {
  const message =
    face === 'admin'
      ? 'a valid API key is required: Authorization: Bearer <key> (customer access tokens are for /storefront/graphql)'
      : 'a valid customer access token is required: Authorization: Bearer ct_… (the shop\'s API key is for /graphql, never a browser)';
  return new GraphQLError(message, { extensions: { code: 'unauthorized', http: { status: 401, headers: { 'www-authenticate': 'Bearer' } } } });
}

/** The DomainError behind an error Yoga reports, if any: the client's mistake, answered with its code. */
function clientMistake(err: unknown): DomainError | undefined {
  const original = err instanceof GraphQLError ? err.originalError : err;
  return original instanceof DomainError ? original : undefined;
}

/** Runs of one document before it is compiled: one-off documents are not worth the milliseconds. */
export const COMPILE_AFTER_RUNS = 3;

/**
 * Queries and mutations that keep coming back run as JavaScript compiled for their operation
 * (graphql-jit) instead of through the general executor, which took about 0.05 ms of every
 * pointsAdd: a tenth of the server's CPU for it. The general executor still answers:
 * - subscriptions (this hooks execute only): graphql-jit's subscribe does not give the streams Yoga serves;
 * - requests whose variables do not fit: graphql-jit words those errors its own way, without their
 *   locations and without the 400 Yoga gives them. Nothing has run when they come back, so the
 *   general executor runs the request again to answer it.
 */
function useCompiledOperations(logger: Logger): Plugin {
  const entryOf = perOperation((): { runs: number; compiled?: CompiledQuery | null } => ({ runs: 0 }));
  return {
    onExecute({ args, executeFn, setExecuteFn }) {
      const entry = entryOf(args.document, args.operationName);
      if (++entry.runs <= COMPILE_AFTER_RUNS) return;
      if (entry.compiled === undefined) {
        const result = compileQuery(args.schema, args.document, args.operationName ?? undefined);
        if (isCompiledQuery(result)) entry.compiled = result;
        else {
          entry.compiled = null;
          logger.warn({ errors: result.errors?.map((e) => e.message) }, 'graphql-jit could not compile an operation; it runs on the general executor');
        }
      }
      const { compiled } = entry;
      if (!compiled) return;
      setExecuteFn(async (execution) => {
        const result = (await compiled.query(execution.rootValue, execution.contextValue, execution.variableValues)) as ExecutionResult;
        return 'data' in result ? result : executeFn(execution);
      });
    },
  };
}

export type GraphQLServices = {
  rateLimiter: RateLimiter;
  storefrontLimiter: StorefrontLimiter;
  webhooks: WebhookSubscriptionDeps;
  bus: EventBus;
  shopifyAdmin: ShopifyAdmin;
  mail: MailDeps;
  /** PUBLIC_URL: where one-time staff links point (else the request's own origin). */
  publicUrl: string | null;
  /** The clock of staff links' expiry. */
  now: () => Date;
  shopDeletionGraceDays: number;
};

/**
 * Yoga over one face's schema; Fastify (or the graphql-ws handshake) authenticates, Yoga turns who
 * it found into the context. Both faces have the same document limits, compiled operations and
 * error masking; the admin one counts against the shop's limits, the storefront
 * one counts per customer (per IP at the door) and answers for the token's customer only.
 */
export function createGraphQLServer(db: DB, logger: Logger, services: GraphQLServices, face: Face = 'admin') {
  const faceSchema = face === 'admin' ? schema : storefrontSchema;
  const limits = face === 'admin' ? useRateLimits(services.rateLimiter, faceSchema) : useStorefrontRateLimits(services.storefrontLimiter);
  return createYoga<ServerContext, GraphQLContext>({
    schema: faceSchema,
    graphqlEndpoint: face === 'admin' ? '/graphql' : STOREFRONT_ENDPOINT,
    plugins: [useRequestChecks(), useLimits(), useStaffRoles(), limits, useCompiledOperations(logger), useHeavyOperationQueue(faceSchema)],
    // Browsers get no CORS from Yoga: /graphql is for servers (and its own GraphiQL page); the
    // storefront's origins are answered by its route (src/http/storefront-route.ts).
    cors: false,
    logging: {
      debug: (...args) => logger.debug(args.map(String).join(' ')),
      info: (...args) => logger.info(args.map(String).join(' ')),
      warn: (...args) => logger.warn(args.map(String).join(' ')),
      error: (...args) => {
        const err = args.find((a) => a instanceof Error);
        const mistake = clientMistake(err);
        // Yoga logs every error its masking replaced, ours included: a client's mistake (bad input, an
        // unknown topic or customer) is answered with its code and is no server fault.
        if (mistake) logger.info({ code: mistake.code, path: err instanceof GraphQLError ? err.path?.join('.') : undefined }, `GraphQL client error: ${mistake.message}`);
        else logger.error({ err }, args.map(String).join(' '));
      },
    },
    // GraphiQL is a page of our own (src/http/graphiql.ts), its scripts served as files.
    graphiql: false,
    landingPage: false,
    context: ({ req }) => {
      const linkBase = services.publicUrl ?? `${req.protocol ?? 'http'}://${req.host ?? 'localhost'}`;
      const common = {
        db, webhooks: services.webhooks, bus: services.bus, shopifyAdmin: services.shopifyAdmin, mail: services.mail, linkBase, now: services.now, shopDeletionGraceDays: services.shopDeletionGraceDays, overWebSocket: req.overWebSocket === true,
      };
      if (face === 'admin') {
        // A machine's API key, or a person's session (its role checked per field: useStaffRoles).
        if (!req.shop || !(req.apiKey || req.staff)) throw unauthenticatedError(face);
        return { ...common, shop: req.shop, apiKey: req.apiKey ?? null, staff: req.apiKey ? null : (req.staff ?? null), customer: null };
      }
      if (!req.shop || !req.customer) throw unauthenticatedError(face);
      return { ...common, shop: req.shop, apiKey: null, staff: null, customer: req.customer };
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
