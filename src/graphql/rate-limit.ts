import { type DocumentNode, GraphQLError, type GraphQLSchema } from 'graphql';
import type { Plugin } from 'graphql-yoga';
import { type RateLimiter, rateLimitHeaders, rateLimitMessage } from '../rate-limit/limiter.js';
import { GRAPHQL_OPERATION, graphqlFieldOperation, type RateLimitedOperation } from '../rate-limit/operations.js';
import type { StorefrontLimiter } from '../rate-limit/storefront.js';
import { type GraphQLContext, type ServerContext, tokenHolder } from './builder.js';
import { graphqlRateUnits } from './limits.js';
import { perOperation } from './per-operation.js';
import { rootFieldNames } from './selections.js';

/**
 * Every GraphQL operation counts against the shop's GraphQL limit by its cost (graphqlRateUnits:
 * one unit for a mutation or a small page, more for wide nested lists) and, for each root field
 * with a REST twin (pointsAdd, webhookSubscriptionRotateSecret, …), once against that twin's limit.
 * A refused operation runs nothing: HTTP 429 with Retry-After and one error, code `rate_limited`.
 */
export function useRateLimits(limiter: RateLimiter, schema: GraphQLSchema): Plugin<GraphQLContext & ServerContext> {
  const operationsOf = perOperation((document, operationName): readonly RateLimitedOperation[] => {
    const twins = rootFieldNames(document, operationName).map(graphqlFieldOperation);
    // An operation listed n times counts n times.
    const units = Array.from({ length: graphqlRateUnits(schema, document, operationName) }, () => GRAPHQL_OPERATION);
    return [...units, ...twins.filter((twin) => twin !== undefined)];
  });
  const check = async (payload: {
    args: { document: DocumentNode; operationName?: string | null | undefined; contextValue: GraphQLContext & ServerContext };
    setResultAndStopExecution(result: { errors: GraphQLError[] }): void;
  }) => {
    const { document, operationName, contextValue } = payload.args;
    const operations = operationsOf(document, operationName);
    const decision = await limiter.consume(contextValue.shop.id, operations);
    const headers = rateLimitHeaders(decision);
    // No reply to put headers on when the operation came over a WebSocket.
    contextValue.reply?.headers(headers);
    if (!decision.allowed) {
      payload.setResultAndStopExecution({
        errors: [new GraphQLError(rateLimitMessage(decision), { extensions: { code: 'rate_limited', http: { status: 429, headers } } })],
      });
    }
  };
  return { onExecute: check, onSubscribe: check };
}

/**
 * The storefront's count: each operation once against its customer (src/rate-limit/storefront.ts;
 * the client IP was counted at the door). A refused one runs nothing: 429 with Retry-After.
 */
export function useStorefrontRateLimits(limiter: StorefrontLimiter): Plugin<GraphQLContext & ServerContext> {
  const check = async (payload: {
    args: { contextValue: GraphQLContext & ServerContext };
    setResultAndStopExecution(result: { errors: GraphQLError[] }): void;
  }) => {
    const { contextValue } = payload.args;
    const decision = await limiter.consumeCustomer(tokenHolder(contextValue).customerId);
    if (!decision.allowed) payload.setResultAndStopExecution({ errors: [storefrontRateLimitError(decision)] });
  };
  return { onExecute: check, onSubscribe: check };
}

export function storefrontRateLimitError(decision: { retryAfterSec: number; message: string }): GraphQLError {
  const headers = { 'retry-after': String(decision.retryAfterSec) };
  return new GraphQLError(decision.message, { extensions: { code: 'rate_limited', http: { status: 429, headers } } });
}
