import SchemaBuilder from '@pothos/core';
import DataloaderPlugin from '@pothos/plugin-dataloader';
import RelayPlugin from '@pothos/plugin-relay';
import { GraphQLError } from 'graphql';
import type { DB } from '../db/database.js';
import type { ApiKeyRef, Shop } from '../domain/shops.js';
import type { EventBus } from '../events/bus.js';
import type { WebhookSubscriptionDeps } from '../domain/webhook-subscriptions.js';

export type GraphQLContext = {
  db: DB;
  shop: Shop;
  /** The API key the request (or the graphql-ws connection) authenticated with. */
  apiKey: ApiKeyRef;
  webhooks: WebhookSubscriptionDeps;
  /** Committed events, for subscriptions. */
  bus: EventBus;
};

export const builder = new SchemaBuilder<{
  Context: GraphQLContext;
  Scalars: { DateTime: { Input: Date; Output: Date }; JSON: { Input: unknown; Output: unknown } };
  DefaultFieldNullability: false;
  DefaultInputFieldRequiredness: true;
}>({
  plugins: [RelayPlugin, DataloaderPlugin],
  defaultFieldNullability: false,
  defaultInputFieldRequiredness: true,
  relay: {
    // Objects keep the contract's `_id`; no global Node ids or node/nodes queries.
    nodeQueryOptions: false,
    nodesQueryOptions: false,
    clientMutationId: 'omit',
    cursorType: 'String',
  },
});

/**
 * For the fields resolved once per node of a list (a customer's activities, its referral code, …):
 * their loaders gather a request's nodes into one query. Nothing is cached between loads: a
 * subscription keeps its context for every event, and a mutation's answer must show its change.
 */
export const BATCH_ONLY = { cache: false } as const;

builder.queryType({});
builder.mutationType({});
builder.subscriptionType({});

builder.scalarType('DateTime', {
  description: 'An ISO 8601 UTC timestamp with milliseconds, e.g. 2026-11-22T10:22:00.000Z',
  serialize: (value) => value.toISOString(),
  parseValue: (value) => {
    const date = typeof value === 'string' ? new Date(value) : null;
    if (!date || Number.isNaN(date.getTime())) throw new GraphQLError('DateTime must be an ISO 8601 string');
    return date;
  },
});

builder.scalarType('JSON', {
  description: 'Any JSON value, as is (the data of an event: the resource after the change).',
  serialize: (value) => value,
  parseValue: (value) => value,
});
