/**
 * What each request counts against: the one table both faces read. A REST route and the GraphQL
 * root fields that do the same thing share one per-shop bucket, so GraphQL is no way around a
 * REST limit. `default` is RATE_LIMIT_PER_MINUTE, or the shop's own override.
 */
export type RateLimitedOperation = { name: string; limit: number | 'default' };

type Entry = RateLimitedOperation & {
  /** `METHOD /path` as registered under /rest-api/v1. */
  rest: string[];
  /** Query and mutation root fields. */
  graphql: string[];
};

const OPERATIONS: Entry[] = [
  // The contract's table ("Limits"); the methods on /webhooks/subscriptions share one limit (re-enabling too).
  {
    name: 'webhook_subscriptions',
    limit: 30,
    rest: [
      'GET /webhooks/subscriptions',
      'POST /webhooks/subscriptions',
      'POST /webhooks/subscription',
      'PUT /webhooks/subscriptions/:id',
      'DELETE /webhooks/subscriptions/:id',
      'POST /webhooks/subscriptions/:id/enable',
    ],
    graphql: ['webhookSubscriptions', 'webhookSubscriptionCreate', 'webhookSubscriptionUpdate', 'webhookSubscriptionDelete', 'webhookSubscriptionEnable'],
  },
  {
    name: 'webhook_secret_rotation',
    limit: 5,
    rest: ['POST /webhooks/subscriptions/:id/rotate-secret'],
    graphql: ['webhookSubscriptionRotateSecret'],
  },
  // Reading one delivery counts as a read of the deliveries list.
  {
    name: 'webhook_deliveries',
    limit: 60,
    rest: ['GET /webhooks/deliveries', 'GET /webhooks/deliveries/:id'],
    graphql: ['webhookDeliveries', 'webhookDelivery'],
  },
  { name: 'webhook_delivery_replay', limit: 10, rest: ['POST /webhooks/deliveries/:id/replay'], graphql: ['webhookDeliveryReplay'] },
  // Configurable limits for points, redemptions and referrals.
  { name: 'points_add', limit: 'default', rest: ['POST /points/add'], graphql: ['pointsAdd'] },
  { name: 'points_subtract', limit: 'default', rest: ['POST /points/substract', 'POST /points/subtract'], graphql: ['pointsSubtract'] },
  { name: 'points_update', limit: 'default', rest: ['POST /points/update'], graphql: ['pointsSet'] },
  { name: 'redemptions_list', limit: 'default', rest: ['GET /pointsRedemptions'], graphql: ['pointsRedemptions'] },
  { name: 'redemptions_redeem', limit: 'default', rest: ['POST /pointsRedemptions'], graphql: ['pointsRedeem'] },
  // Asked by a checkout as the cart changes: reads only, at the configurable limit.
  { name: 'discount_codes_check', limit: 'default', rest: ['POST /discountCodes/:code/check'], graphql: ['discountCodeCheck'] },
  { name: 'codes_cancel', limit: 'default', rest: ['POST /pointsRedemptions/:code/cancel'], graphql: ['discountCodeCancel'] },
  { name: 'referral_code', limit: 'default', rest: ['GET /referral'], graphql: [] },
  { name: 'referral_referees', limit: 'default', rest: ['GET /referral/referee'], graphql: [] },
  { name: 'orders_upsert', limit: 'default', rest: ['PUT /orders/:orderId'], graphql: ['orderUpsert'] },
  { name: 'orders_read', limit: 'default', rest: ['GET /orders/:orderId'], graphql: ['order'] },
  { name: 'earning_rules_list', limit: 'default', rest: ['GET /earningRules', 'GET /earningRules/eligibility'], graphql: ['earningRules'] },
  { name: 'actions_report', limit: 'default', rest: ['POST /actions'], graphql: ['actionReport'] },
  // An export reads the whole shop (seconds at a million customers): a person's pace, not a script's.
  { name: 'exports', limit: 10, rest: ['GET /exports/customers.csv', 'GET /exports/ledger.csv'], graphql: [] },
];

/** Every GraphQL operation counts here once, besides any REST twin its root fields have. */
export const GRAPHQL_OPERATION: RateLimitedOperation = { name: 'graphql', limit: 'default' };

const byRoute = new Map(OPERATIONS.flatMap((op) => op.rest.map((route) => [route, op] as const)));
const byField = new Map(OPERATIONS.flatMap((op) => op.graphql.map((field) => [field, op] as const)));

/** The operation of a REST route (`url` as registered, relative to /rest-api/v1). */
export function restOperation(method: string, url: string): RateLimitedOperation {
  const route = `${method === 'HEAD' ? 'GET' : method} ${url}`;
  // A route without an entry gets a bucket of its own at the configurable limit.
  return byRoute.get(route) ?? { name: route, limit: 'default' };
}

/** The REST twin of a GraphQL root field, if it has one. */
export function graphqlFieldOperation(field: string): RateLimitedOperation | undefined {
  return byField.get(field);
}

/** The table's REST routes and GraphQL fields, for the test that keeps it in step with the code. */
export function rateLimitTable(): ReadonlyArray<Readonly<Entry>> {
  return OPERATIONS;
}
