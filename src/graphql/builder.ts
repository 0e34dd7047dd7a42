import SchemaBuilder from '@pothos/core';
import DataloaderPlugin from '@pothos/plugin-dataloader';
import RelayPlugin from '@pothos/plugin-relay';
import SubGraphPlugin from '@pothos/plugin-sub-graph';
import type { FastifyReply } from 'fastify';
import { GraphQLError } from 'graphql';
import type { DB } from '../db/database.js';
import { type Actor, apiKeyActor, staffActor } from '../domain/audit/index.js';
import type { TokenHolder } from '../domain/customers/index.js';
import type { MailDeps } from '../domain/mail/index.js';
import type { ApiKeyRef, Shop } from '../domain/shops/index.js';
import type { StaffSession } from '../domain/staff/index.js';
import type { WebhookSubscriptionDeps } from '../domain/webhooks/index.js';
import type { EventBus } from '../events/bus.js';
import type { ShopifyAdmin } from '../shopify-admin/connect.js';

/**
 * Over HTTP Fastify's request and reply; over graphql-ws only who the connection authenticated as:
 * the shop and its key (/graphql) or the shop and a customer's token (/storefront/graphql).
 */
export type ServerContext = {
  req: {
    shop: Shop | null;
    apiKey?: ApiKeyRef | null;
    customer?: TokenHolder | null;
    staff?: StaffSession | null;
    protocol?: string;
    host?: string;
    /** Set by graphql-ws for each operation of a socket (src/http/websocket.ts). */
    overWebSocket?: boolean;
  };
  reply?: FastifyReply;
};

export type GraphQLContext = {
  db: DB;
  shop: Shop;
  /** /graphql: the API key the request (or the graphql-ws connection) authenticated with. */
  apiKey: ApiKeyRef | null;
  /** /graphql: the staff session (cookie and CSRF token, or a socket's cookie) the request authenticated with, when no key did. */
  staff: StaffSession | null;
  /** Whether the operation came over a graphql-ws socket (else over HTTP): a person's live events need one. */
  overWebSocket: boolean;
  /** Where one-time links point: PUBLIC_URL, else the origin the request came to. */
  linkBase: string;
  /** The clock staff links and sessions are read against (tests move it). */
  now: () => Date;
  /** /storefront/graphql: the customer access token's holder; every field answers for this customer only. */
  customer: TokenHolder | null;
  webhooks: WebhookSubscriptionDeps;
  /** Committed events, for subscriptions. */
  bus: EventBus;
  /** Connects the shop's store to Shopify's Admin API (it calls Shopify). */
  shopifyAdmin: ShopifyAdmin;
  /** The shop's SMTP password's key and the bound on each wait for its server (shopMailTest). */
  mail: MailDeps;
  /** SHOP_DELETION_GRACE_DAYS: how long shopDeletionRequest's deletion waits. */
  shopDeletionGraceDays: number;
};

/**
 * One builder, two schemas (DESIGN.md "Storefront access"): `admin` (/graphql, the shop's key)
 * holds every type and field unless told otherwise; `storefront` (/storefront/graphql, a customer's
 * token) only what is tagged STOREFRONT: the customer's own data, never another customer's.
 */
export type SubGraph = 'admin' | 'storefront';
/** Tag for the types and fields both faces serve. */
export const STOREFRONT: SubGraph[] = ['admin', 'storefront'];

export const builder = new SchemaBuilder<{
  Context: GraphQLContext;
  SubGraphs: SubGraph;
  Scalars: { DateTime: { Input: Date; Output: Date }; JSON: { Input: unknown; Output: unknown }; BigCount: { Input: number; Output: number } };
  DefaultFieldNullability: false;
  DefaultInputFieldRequiredness: true;
}>({
  plugins: [SubGraphPlugin, RelayPlugin, DataloaderPlugin],
  subGraphs: { defaultForTypes: ['admin'], fieldsInheritFromTypes: true },
  defaultFieldNullability: false,
  defaultInputFieldRequiredness: true,
  relay: {
    // Objects keep the contract's `_id`; no global Node ids or node/nodes queries.
    nodeQueryOptions: false,
    nodesQueryOptions: false,
    clientMutationId: 'omit',
    cursorType: 'String',
    pageInfoTypeOptions: { subGraphs: STOREFRONT },
  },
});

/**
 * For the fields resolved once per node of a list (a customer's activities, its referral code, …):
 * their loaders gather a request's nodes into one query. Nothing is cached between loads: a
 * subscription keeps its context for every event, and a mutation's answer must show its change.
 */
export const BATCH_ONLY = { cache: false } as const;

// The roots are in both schemas; their fields are admin's unless a field says otherwise.
builder.queryType({ subGraphs: STOREFRONT, defaultSubGraphsForFields: ['admin'] });
builder.mutationType({ subGraphs: STOREFRONT, defaultSubGraphsForFields: ['admin'] });
builder.subscriptionType({ subGraphs: STOREFRONT, defaultSubGraphsForFields: ['admin'] });

/**
 * Who an admin operation's changes are audited as (docs/architecture.md "The audit log"): its key,
 * else its person. Passed to the domain's writes explicitly, never kept aside.
 */
export function actorOf(ctx: Pick<GraphQLContext, 'apiKey' | 'staff'>): Actor | undefined {
  if (ctx.apiKey) return apiKeyActor(ctx.apiKey);
  if (ctx.staff) return staffActor(ctx.staff);
  return undefined;
}

/** The customer a storefront operation speaks for (the storefront schema is served only to requests with a token). */
export function tokenHolder(ctx: GraphQLContext): TokenHolder {
  if (!ctx.customer) throw new GraphQLError('this field needs a customer access token', { extensions: { code: 'unauthorized' } });
  return ctx.customer;
}

builder.scalarType('DateTime', {
  subGraphs: STOREFRONT,
  description: 'An ISO 8601 UTC timestamp with milliseconds, e.g. 2026-11-22T10:22:00.000Z',
  serialize: (value) => value.toISOString(),
  parseValue: (value) => {
    const date = typeof value === 'string' ? new Date(value) : null;
    if (!date || Number.isNaN(date.getTime())) throw new GraphQLError('DateTime must be an ISO 8601 string');
    return date;
  },
});

builder.scalarType('BigCount', {
  description: 'A whole number that may pass GraphQL Int\'s 2^31 (a shop\'s points in all), as a JSON number, exact up to 2^53.',
  serialize: (value) => value,
  parseValue: (value) => {
    if (typeof value !== 'number' || !Number.isSafeInteger(value)) throw new GraphQLError('BigCount must be a whole number up to 2^53');
    return value;
  },
});

builder.scalarType('JSON', {
  subGraphs: STOREFRONT,
  description: 'Any JSON value, as is (the data of an event: the resource after the change).',
  serialize: (value) => value,
  parseValue: (value) => value,
});
