import { z } from 'zod';
import { createDocument, type ZodOpenApiOperationObject, type ZodOpenApiPathsObject } from 'zod-openapi';
import { customerAccessTokenInputSchema, customerAccessTokensRevokeInputSchema, customerPageQuerySchema } from '../domain/customers/index.js';
import { codeCancelSchema, discountCodeParamSchema } from '../domain/codes/index.js';
import { complianceRequestsQuerySchema } from '../domain/data-rights/index.js';
import { CUSTOMER_COLUMNS, LEDGER_COLUMNS } from '../domain/exports/index.js';
import { EVENT_TOPICS } from '../domain/kernel/index.js';
import { pointsChangeSchemas } from '../domain/ledger/index.js';
import { orderIdSchema, orderInputSchema } from '../domain/orders/index.js';
import { actionInputSchema } from '../domain/program/index.js';
import { discountCodeCheckSchema as checkBodySchema, pointsRedeemSchema } from '../domain/rewards/index.js';
import { deliveryListQuerySchema, secretRotationSchema, webhookSubscriptionCreateSchema, webhookSubscriptionUpdateSchema } from '../domain/webhooks/index.js';
import { REST_PREFIX } from './index.js';
import { activitySchema, complianceRequestSchema, customerSchema, customerTierSchema, discountCodeCheckSchema, discountCodeSchema, earningRuleSchema, idSchema, orderSchema, pointsRedemptionSchema, refereeSchema, timestampSchema, webhookDeliveryDetailSchema, webhookDeliverySchema, webhookEventSchema, webhookSubscriptionSchema, webhookSubscriptionWithSecretSchema, webhookTopicSchema } from './record-schemas.js';
import { SHOPIFY_WEBHOOKS_PATH } from './shopify-webhooks.js';

/**
 * The OpenAPI 3.1 document of the REST API (GET /openapi.json), generated from the zod schemas
 * that validate the requests (src/domain) and those of the response bodies (./record-schemas.ts).
 * test/openapi.test.ts checks that every registered route is here and that real responses match.
 */

// --- Envelopes ------------------------------------------------------------------------------

const ok = <S extends z.ZodRawShape>(id: string, shape: S, message?: string) =>
  z
    .strictObject({
      success: z.literal(true),
      ...(message === undefined ? {} : { message: z.string().meta({ example: message }) }),
      ...shape,
    })
    .meta({ id });

const fieldIssue = z.strictObject({ path: z.string(), message: z.string() }).meta({ id: 'FieldIssue' });

/** The one error shape (src/requests/errors.ts), narrowed to the status and the codes a route can give. */
function errorBody(status: number, codes: readonly string[]) {
  return z.strictObject({
    success: z.literal(false),
    statusCode: z.literal(status),
    error: z.enum(codes as [string, ...string[]]),
    message: z.string(),
    details: z
      .array(fieldIssue)
      .optional()
      .meta({ description: 'With `validation_error`: each field at fault' }),
  });
}

const STATUS_TEXT: Record<number, string> = {
  400: 'Bad request',
  401: 'No valid API key',
  404: 'Not found',
  409: 'Conflict',
  413: 'Body over 1 MiB',
  422: 'Refused by a business rule',
  429: 'Rate limit exceeded',
  503: 'Database unreachable; retry shortly',
};

// --- Headers and parameters -----------------------------------------------------------------

const rateLimitHeaders = {
  'RateLimit-Limit': z.int().meta({ header: { id: 'RateLimit-Limit' }, description: 'Requests allowed per rolling minute for this operation' }),
  'RateLimit-Remaining': z.int().meta({ header: { id: 'RateLimit-Remaining' }, description: 'Requests left in the window' }),
  'RateLimit-Reset': z.int().meta({ header: { id: 'RateLimit-Reset' }, description: 'Seconds until a request is free again' }),
};
const retryAfter = { 'Retry-After': z.int().meta({ header: { id: 'Retry-After' }, description: 'Seconds to wait' }) };
const replayed = {
  'Idempotent-Replayed': z.literal('true').optional().meta({ header: { id: 'Idempotent-Replayed' }, description: 'This is the stored response of an earlier request with the same Idempotency-Key' }),
};

const idempotencyKey = z
  .string()
  .regex(/^[\x21-\x7e]{1,255}$/)
  .meta({
    param: { id: 'IdempotencyKey' },
    description: 'Makes the POST (or PUT) safe to retry for 24 h: a repeat with the same body gets the stored response and changes nothing; the same key with another body is `422 idempotency_key_reused`',
    example: 'order-1001-points',
  });

const pathId = (what: string) => z.object({ id: idSchema.meta({ description: `The ${what} id` }) });

// page and pageSize are required, but their query-string coercion hides that from the generator.
const required = <S extends z.ZodType>(schema: S, description: string) => schema.meta({ param: { required: true }, description });
const customerPageQuery = customerPageQuerySchema.extend({
  customerIdentifier: customerPageQuerySchema.shape.customerIdentifier.meta({
    description: 'The shop\'s customer id, or an e-mail (matched case-insensitively)',
    example: 'ada@example.com',
  }),
  page: required(customerPageQuerySchema.shape.page, 'From 1'),
  pageSize: required(customerPageQuerySchema.shape.pageSize, 'At most 250'),
});
const customerQuery = customerPageQuery.pick({ customerIdentifier: true });

const csvFile = (columns: readonly string[]) => z.string().meta({ example: `${columns.join(',')}\r\n…` });

// --- Operations -----------------------------------------------------------------------------

type Method = 'get' | 'post' | 'put' | 'delete';

type Route = {
  method: Method;
  /** As registered under /rest-api/v1, Fastify style (`:id`). */
  path: string;
  operationId: string;
  tag: string;
  summary: string;
  description?: string;
  query?: z.ZodObject;
  params?: z.ZodObject;
  /** Request body; `optional` for routes that accept none. */
  body?: { schema: z.ZodType; optional?: boolean; example?: unknown };
  success: {
    status: number;
    description: string;
    schema: z.ZodType;
    /** A PUT that also answers 201, same body, when it created the resource. */
    created?: boolean;
    /** The body's media type; JSON when omitted. */
    mediaType?: 'text/csv';
  };
  /** Codes of this route's own errors, by status, besides those every route has. */
  errors?: Partial<Record<number, readonly string[]>>;
};

const pointsBody = (schema: z.ZodType, amount: number) => ({
  schema,
  example: { customerIdentifier: 'ada@example.com', amount, description: 'order #1001', note: null },
});
const pointsChanged = { status: 200, description: 'The ledger entry of the change', schema: ok('PointsChangeResponse', { activity: activitySchema }) };
const subscriptionCreate: Omit<Route, 'path' | 'operationId'> = {
  method: 'post',
  tag: 'Webhooks',
  summary: 'Subscribe a callback URL to a topic',
  description: 'The URL must be `https:` and public. The `signingSecret` is shown only in this response.',
  body: { schema: webhookSubscriptionCreateSchema, example: { topic: 'points/*', callbackUrl: 'https://shop.example.com/hooks/loyalty' } },
  success: {
    status: 201,
    description: 'Created, with its signing secret',
    schema: ok('WebhookSubscriptionCreated', { subscription: webhookSubscriptionWithSecretSchema }, 'Webhook subscription created; keep the signing secret, it is shown only now'),
  },
  errors: { 409: ['subscription_exists'] },
};
const secretRotated = ok('WebhookSecretRotated', { subscription: webhookSubscriptionWithSecretSchema }, 'Signing secret rotated; keep the new secret, it is shown only now');

const subtract: Route = {
  method: 'post', path: '/points/substract', operationId: 'pointsSubstract', tag: 'Points', summary: 'Subtract points (the contract\'s spelling)',
  description: 'A subtraction beyond the balance is refused; the balance never goes negative.',
  body: pointsBody(pointsChangeSchemas.subtract, 20), success: pointsChanged,
  errors: { 404: ['customer_not_found'], 422: ['insufficient_points'] },
};

export const REST_ROUTES: readonly Route[] = [
  {
    method: 'post', path: '/points/add', operationId: 'pointsAdd', tag: 'Points', summary: 'Add points',
    body: pointsBody(pointsChangeSchemas.add, 50), success: pointsChanged,
    errors: { 404: ['customer_not_found'], 422: ['points_limit_exceeded'] },
  },
  subtract,
  { ...subtract, path: '/points/subtract', operationId: 'pointsSubtract', summary: 'Subtract points (alias of /points/substract)' },
  {
    method: 'post', path: '/points/update', operationId: 'pointsUpdate', tag: 'Points', summary: 'Set the balance',
    description: '`amount` is the new balance (0 or more), not a delta.',
    body: pointsBody(pointsChangeSchemas.set, 300), success: pointsChanged,
    errors: { 404: ['customer_not_found'] },
  },
  {
    method: 'get', path: '/pointsRedemptions', operationId: 'pointsRedemptionsList', tag: 'Redemptions',
    summary: 'List the ways to redeem, flagged for a customer', description: 'By `sortIndex`; no total count or next-page marker.',
    query: customerPageQuery,
    success: { status: 200, description: 'One page of options', schema: ok('PointsRedemptionsPage', { pointsRedemptions: z.array(pointsRedemptionSchema) }, 'Points redemptions retrieved') },
    errors: { 404: ['customer_not_found'] },
  },
  {
    method: 'post', path: '/pointsRedemptions', operationId: 'pointsRedeem', tag: 'Redemptions', summary: 'Redeem points for a discount code',
    description: 'A fixed option costs exactly `rewardValue`; a variable one takes `pointsAmount` in steps of `rewardValue`. `variantId` is required for `free_product` options.',
    body: { schema: pointsRedeemSchema, example: { customerIdentifier: 'ada@example.com', pointsAmount: 100, rewardId: '019aa9c3e5f2d1c7a8b9e0f1', currencyActive: 'EUR' } },
    success: { status: 200, description: 'The discount code', schema: ok('PointsRedeemed', { discountCode: z.string().meta({ example: 'SAVE5K7QX2MZP9A' }) }, 'Points redeemed') },
    errors: {
      404: ['customer_not_found', 'reward_not_found'],
      422: ['reward_inactive', 'reward_expired', 'insufficient_points', 'variant_not_eligible'],
    },
  },
  {
    method: 'post', path: '/discountCodes/:code/check', operationId: 'discountCodeCheck', tag: 'Redemptions', summary: 'What a code gives for a cart',
    description:
      'For a headless checkout; changes nothing. Money is a decimal string in the cart\'s currency; `price` is per unit. A code that cannot apply answers 200 with `applicable: false` and its `reason` ' +
      '(an unknown code, or another shop\'s, is `code_not_found`). See docs/api.md "Rewards at checkout" for the arithmetic.',
    params: z.object({ code: z.string().meta({ description: 'The discount code', example: 'SAVE5K7QX2MZP9A' }) }),
    body: {
      schema: checkBodySchema,
      example: { cart: { currency: 'USD', lineItems: [{ productId: 'shirt', variantId: 'shirt-m', collectionIds: ['summer'], quantity: 2, price: '19.99' }], shippingPrice: '5.00' } },
    },
    success: { status: 200, description: 'The answer', schema: ok('DiscountCodeChecked', { check: discountCodeCheckSchema }, 'Discount code checked') },
  },
  {
    method: 'post', path: '/pointsRedemptions/:code/cancel', operationId: 'discountCodeCancel', tag: 'Redemptions', summary: 'Cancel an unused discount code',
    description:
      'An `issued` code becomes `cancelled` (a `redemptions/cancelled` event); with `returnPoints` its points go back to its customer once, as a `refund_redemption` ledger entry (a `points/refunded` event). ' +
      'A code already used, expired or cancelled is `409 code_not_issued`, its state in the message. The body may be omitted (no points back).',
    params: z.object({ code: discountCodeParamSchema.meta({ description: 'The discount code, as issued', example: 'SAVE5K7QX2MZP9A' }) }),
    body: { schema: codeCancelSchema, optional: true, example: { returnPoints: true } },
    success: {
      status: 200,
      description: 'The code as it is now, and the ledger entry that returned its points',
      schema: ok('DiscountCodeCancelled', { discountCode: discountCodeSchema, activity: activitySchema.nullable().meta({ description: 'The `refund_redemption` entry; null without `returnPoints`' }) }, 'Discount code cancelled'),
    },
    errors: { 404: ['code_not_found'], 409: ['code_not_issued'], 422: ['points_limit_exceeded'] },
  },
  {
    method: 'get', path: '/referral', operationId: 'referralCode', tag: 'Referrals', summary: 'Get (or create) a customer\'s referral code',
    query: customerQuery,
    success: { status: 200, description: 'The code', schema: ok('ReferralCodeResponse', { data: z.strictObject({ referralCode: z.string().meta({ example: 'K7QX2MZP' }) }) }, 'Referral code retrieved') },
    errors: { 404: ['customer_not_found'] },
  },
  {
    method: 'get', path: '/referral/referee', operationId: 'referees', tag: 'Referrals', summary: 'List the customers a referrer referred',
    query: customerPageQuery,
    success: { status: 200, description: 'One page of referees, in sign-up order', schema: ok('RefereesPage', { data: z.array(refereeSchema) }, 'Referees retrieved') },
    errors: { 404: ['customer_not_found'] },
  },
  {
    method: 'get', path: '/webhooks/topics', operationId: 'webhookTopics', tag: 'Webhooks', summary: 'The topic catalog',
    success: { status: 200, description: 'Every topic', schema: ok('WebhookTopics', { topics: z.array(webhookTopicSchema) }, 'Webhook topics; subscribe to one, or to <group>/* for every topic of a group') },
  },
  { ...subscriptionCreate, path: '/webhooks/subscriptions', operationId: 'webhookSubscriptionCreate' },
  { ...subscriptionCreate, path: '/webhooks/subscription', operationId: 'webhookSubscriptionCreateSingular', summary: `${subscriptionCreate.summary} (the contract's singular path)` },
  {
    method: 'get', path: '/webhooks/subscriptions', operationId: 'webhookSubscriptions', tag: 'Webhooks', summary: 'List subscriptions, newest first',
    success: { status: 200, description: 'Every subscription, without secrets', schema: ok('WebhookSubscriptions', { subscriptions: z.array(webhookSubscriptionSchema) }, 'Webhook subscriptions, newest first') },
  },
  {
    method: 'put', path: '/webhooks/subscriptions/:id', operationId: 'webhookSubscriptionUpdate', tag: 'Webhooks', summary: 'Change the callback URL',
    description: 'The topic and the secrets stay; changing the topic takes a delete and a create. A probing or disabled subscription is enabled again.',
    params: pathId('subscription'),
    body: { schema: webhookSubscriptionUpdateSchema, example: { callbackUrl: 'https://shop.example.com/hooks/loyalty-v2' } },
    success: { status: 200, description: 'Updated', schema: ok('WebhookSubscriptionUpdated', { subscription: webhookSubscriptionSchema }, 'Webhook subscription updated') },
    errors: { 404: ['subscription_not_found'], 409: ['subscription_exists'] },
  },
  {
    method: 'post', path: '/webhooks/subscriptions/:id/rotate-secret', operationId: 'webhookSubscriptionRotateSecret', tag: 'Webhooks',
    summary: 'Rotate the signing secret',
    description: 'Secrets accepted until now stay valid for `graceHours` more (default 24; 0 revokes them at once). The body may be omitted.',
    params: pathId('subscription'),
    body: { schema: secretRotationSchema, optional: true, example: { graceHours: 24 } },
    success: { status: 201, description: 'The new secret, shown only now', schema: secretRotated },
    errors: { 404: ['subscription_not_found'] },
  },
  {
    method: 'post', path: '/webhooks/subscriptions/:id/enable', operationId: 'webhookSubscriptionEnable', tag: 'Webhooks',
    summary: 'Re-enable a disabled subscription',
    description: 'Sets `status` to `enabled` (from `disabled` or `probing`); the deliveries it held are attempted again at once. The body may be omitted.',
    params: pathId('subscription'),
    success: { status: 200, description: 'Enabled', schema: ok('WebhookSubscriptionEnabled', { subscription: webhookSubscriptionSchema }, 'Webhook subscription enabled; held deliveries are being sent') },
    errors: { 404: ['subscription_not_found'] },
  },
  {
    method: 'delete', path: '/webhooks/subscriptions/:id', operationId: 'webhookSubscriptionDelete', tag: 'Webhooks', summary: 'Delete a subscription',
    description: 'Its delivery records are kept.',
    params: pathId('subscription'),
    success: { status: 200, description: 'Deleted', schema: ok('WebhookSubscriptionDeleted', {}, 'Webhook subscription deleted; its delivery records are kept') },
    errors: { 404: ['subscription_not_found'] },
  },
  {
    method: 'get', path: '/webhooks/deliveries', operationId: 'webhookDeliveries', tag: 'Webhooks', summary: 'List deliveries, newest first',
    description:
      'Those of deleted subscriptions included. `topic` takes a topic or `<group>/*`. Numbered pages cover the newest 10,000 deliveries (`page * pageSize <= 10000`); to go further, or to walk the list without a page shifting under new deliveries, pass the response\'s `nextCursor` as `after` (in place of `page`).',
    query: deliveryListQuerySchema,
    success: {
      status: 200,
      description: 'One page of deliveries',
      schema: ok('WebhookDeliveries', { deliveries: z.array(webhookDeliverySchema), nextCursor: z.string().nullable().describe('`after` for the next page; null on the last') }, 'Webhook deliveries, newest first'),
    },
  },
  {
    method: 'get', path: '/webhooks/deliveries/:id', operationId: 'webhookDelivery', tag: 'Webhooks', summary: 'One delivery, with its attempts and payload',
    params: pathId('delivery'),
    success: { status: 200, description: 'The delivery', schema: ok('WebhookDeliveryResponse', { delivery: webhookDeliveryDetailSchema }, 'Webhook delivery with its attempts and payload') },
    errors: { 404: ['delivery_not_found'] },
  },
  {
    method: 'post', path: '/webhooks/deliveries/:id/replay', operationId: 'webhookDeliveryReplay', tag: 'Webhooks', summary: 'Send a delivery again',
    description: 'A manual attempt with the same `webhook-id`, to the subscription\'s current URL; the retry schedule is untouched. The body may be omitted.',
    params: pathId('delivery'),
    success: { status: 202, description: 'Accepted; the attempt is being made', schema: ok('WebhookDeliveryReplayAccepted', { delivery: webhookDeliverySchema }, 'Replay accepted: a manual attempt is being made with the same webhook-id') },
    errors: { 404: ['delivery_not_found'], 422: ['subscription_deleted', 'subscription_disabled', 'delivery_payload_purged'] },
  },
  {
    method: 'put', path: '/orders/:orderId', operationId: 'orderUpsert', tag: 'Orders', summary: 'Record an order\'s full state',
    description:
      'The order as it stands now (LoyaltyLion\'s model): the same state again changes nothing; a new state (paid, refunded in part, cancelled) applies the difference in points, once. ' +
      'Money is a decimal string in the order\'s currency. Points follow the shop\'s active `place_order` rules as they stood when the order was first paid; refunds take points back from pending first, then from the balance, which stops at 0 (the shortfall is `unrecoveredPoints`). ' +
      '`discountCodes` are the codes the order used: each issued code of the shop among them becomes `used` by this order when the order is first recorded with it or a later state adds it (whatever the status; one of another customer is used and flagged; a code used, expired or cancelled already stays so; an unknown code is kept on the order). ' +
      'A refund or cancellation never brings a code back; with the shop\'s `returnCodePointsOnRefund`, the order becoming fully refunded or cancelled gives back, once, the points its codes cost. Left out, the order keeps the codes it has.',
    params: z.object({ orderId: orderIdSchema.meta({ description: 'The shop\'s own order id' }) }),
    body: {
      schema: orderInputSchema,
      example: {
        customerIdentifier: 'ada@example.com', currency: 'USD', subtotal: '35.00', shipping: '5.00', tax: '3.20', total: '43.20', refunded: '0', status: 'paid',
        lineItems: [{ productId: 'shirt', quantity: 2, price: '20.00', discount: '5.00' }], discountCodes: [{ code: 'LOYAL-7KD3M9QX2P', amount: '5.00' }],
      },
    },
    success: { status: 200, description: 'Updated, or unchanged', schema: ok('OrderUpserted', { order: orderSchema }, 'Order updated'), created: true },
    errors: {
      404: ['customer_not_found'],
      422: ['order_totals_mismatch', 'refund_exceeds_total', 'order_status_backwards', 'order_customer_changed', 'order_currency_changed', 'order_refund_decreased', 'order_points_limit', 'points_limit_exceeded'],
    },
  },
  {
    method: 'get', path: '/earningRules', operationId: 'earningRules', tag: 'Orders', summary: 'The shop\'s earning rules',
    description: 'Active and inactive, oldest first. Rules are created and changed over GraphQL (`earningRuleCreate`, …).',
    success: { status: 200, description: 'The rules', schema: ok('EarningRules', { data: z.array(earningRuleSchema) }, 'Earning rules retrieved') },
  },
  {
    method: 'get', path: '/earningRules/eligibility', operationId: 'earningRuleEligibility', tag: 'Orders', summary: 'The rules, with what the customer has earned',
    description: '`isEarned`: a sign-up rule already awarded, a custom action already earned in its current period (day or ISO week in the shop\'s time zone, or ever for `once`), a birthday this year. place_order rules earn per order: always false.',
    query: customerQuery,
    success: { status: 200, description: 'The rules with isEarned', schema: ok('EarningRuleEligibility', { data: z.array(earningRuleSchema.safeExtend({ isEarned: z.boolean() })) }, 'Earning rules, with isEarned for the customer') },
    errors: { 404: ['customer_not_found'] },
  },
  {
    method: 'get', path: '/vip/tiers/customer', operationId: 'customerTier', tag: 'Orders', summary: 'The customer\'s VIP tier and progress',
    description: 'The tier the customer holds (null: none), since when, and where they stand: the metric over the window now, the next tier and what it takes to reach it. Tiers are defined over GraphQL (`tierCreate`, …); see docs/tiers.md.',
    query: customerQuery,
    success: { status: 200, description: 'The tier and progress', schema: ok('CustomerTierRetrieved', { data: customerTierSchema }, 'Customer tier retrieved') },
    errors: { 404: ['customer_not_found'] },
  },
  {
    method: 'post', path: '/actions', operationId: 'actionReport', tag: 'Orders', summary: 'Report a custom action (a review, a share…)',
    description: 'The custom rule for `action` awards its points, at most once per `reference` (a repeat answers 200 with `created: false` and changes nothing) and within its limit: once, once a day or once an ISO week in the shop\'s time zone, or unlimited.',
    body: { schema: actionInputSchema, example: { customerIdentifier: 'ada@example.com', action: 'review.posted', reference: 'review-8812' } },
    success: {
      status: 200,
      created: true,
      description: 'Already rewarded for this reference (201 when rewarded now)',
      schema: ok('ActionReported', { created: z.boolean(), points: z.int(), activity: activitySchema.nullable().meta({ description: 'The ledger entry, when rewarded now' }) }, 'Action rewarded'),
    },
    errors: { 404: ['customer_not_found', 'rule_not_found'], 422: ['rule_inactive', 'action_limit_reached', 'points_limit_exceeded'] },
  },
  {
    method: 'post', path: '/customerAccessTokens', operationId: 'customerAccessTokenCreate', tag: 'Storefront', summary: 'A token for one customer\'s storefront',
    description: 'For the shop\'s backend: the browser holds this token (`ct_…`) instead of the API key. It lives `expiresInSeconds` (60 to 86,400; default 3,600) and is shown only here: only its hash is stored.',
    body: { schema: customerAccessTokenInputSchema, example: { customerIdentifier: 'ada@example.com', expiresInSeconds: 3600 } },
    success: {
      status: 201,
      description: 'The token',
      schema: ok('CustomerAccessTokenCreated', { accessToken: z.string().meta({ example: 'ct_abcdefghij_…' }), expiresAt: timestampSchema, customer: customerSchema }, 'Customer access token created'),
    },
    errors: { 404: ['customer_not_found'] },
  },
  {
    method: 'post', path: '/customerAccessTokens/revoke', operationId: 'customerAccessTokensRevoke', tag: 'Storefront', summary: 'Revoke every token of a customer',
    description: 'At once: the customer\'s storefront sessions end (a logout everywhere, a lost device).',
    body: { schema: customerAccessTokensRevokeInputSchema, example: { customerIdentifier: 'ada@example.com' } },
    success: { status: 200, description: 'How many live tokens were revoked', schema: ok('CustomerAccessTokensRevoked', { revokedCount: z.int() }, 'Customer access tokens revoked') },
    errors: { 404: ['customer_not_found'] },
  },
  {
    method: 'get', path: '/customers/data', operationId: 'customerDataExport', tag: 'Data rights', summary: 'Everything held on one customer',
    description: 'One JSON document for a data-protection access request: profile, tier, ledger, pending points, rule awards, orders, codes, referrals (the other party by id only), tokens\' metadata, e-mails and the webhook deliveries that carried the customer\'s data. See docs/data-rights.md.',
    query: customerQuery,
    success: { status: 200, description: 'The document', schema: ok('CustomerDataExported', { data: z.looseObject({ exportedAt: timestampSchema, customer: customerSchema.safeExtend({ erasedAt: timestampSchema.nullable() }) }) }, 'Customer data exported') },
    errors: { 404: ['customer_not_found'] },
  },
  {
    method: 'post', path: '/customers/erase', operationId: 'customerErase', tag: 'Data rights', summary: 'Erase a customer (cannot be undone)',
    description: 'Replaces the customer\'s e-mail, shop customer id and birthday by a tombstone\'s, cancels their issued codes (points not given back), revokes their tokens and purges the stored payloads that carried them; their ledger and orders stay under the tombstone. A `customers/erased` event follows. See docs/data-rights.md.',
    body: { schema: customerAccessTokensRevokeInputSchema, example: { customerIdentifier: 'ada@example.com' } },
    success: {
      status: 200,
      description: 'The tombstone and what was purged',
      schema: ok('CustomerErased', { customer: customerSchema, cancelledCodes: z.int(), revokedTokens: z.int(), purgedDeliveries: z.int(), purgedShopifyWebhooks: z.int() }, 'Customer erased'),
    },
    errors: { 404: ['customer_not_found'] },
  },
  {
    method: 'get', path: '/complianceRequests', operationId: 'complianceRequests', tag: 'Data rights', summary: 'Shopify\'s compliance requests, newest first',
    description: 'Each customers/data_request, customers/redact and shop/redact webhook Shopify sent, with what was done: `exported` (the document is at GET /complianceRequests/{id}), `erased`, `unknown_customer` (nothing held, nothing done) or `shop_deletion_scheduled`. See docs/data-rights.md.',
    query: complianceRequestsQuerySchema,
    success: {
      status: 200,
      description: 'One page of requests',
      schema: ok('ComplianceRequests', { complianceRequests: z.array(complianceRequestSchema), nextCursor: z.string().nullable().describe('`after` for the next page; null on the last') }, 'Compliance requests, newest first'),
    },
  },
  {
    method: 'get', path: '/complianceRequests/:id', operationId: 'complianceRequest', tag: 'Data rights', summary: 'One compliance request, with its document',
    description: 'For a data request: the customer\'s export (as GET /customers/data gives it) when Shopify asked; null when the shop did not know the customer, or once the customer was erased.',
    params: pathId('compliance request'),
    success: {
      status: 200,
      description: 'The request',
      schema: ok('ComplianceRequestRetrieved', { complianceRequest: complianceRequestSchema.safeExtend({ document: z.looseObject({ exportedAt: timestampSchema }).nullable() }) }, 'Compliance request'),
    },
    errors: { 404: ['compliance_request_not_found'] },
  },
  {
    method: 'get', path: '/orders/:orderId', operationId: 'order', tag: 'Orders', summary: 'An order and what it earned',
    params: z.object({ orderId: orderIdSchema.meta({ description: 'The shop\'s own order id' }) }),
    success: { status: 200, description: 'The order', schema: ok('OrderRetrieved', { order: orderSchema }, 'Order retrieved') },
    errors: { 404: ['order_not_found'] },
  },
  {
    method: 'get', path: '/exports/customers.csv', operationId: 'customersExport', tag: 'Exports', summary: 'Every customer, as CSV',
    description: 'Streamed as it is read, in e-mail order, as an attachment. Columns: ' + CUSTOMER_COLUMNS.join(', ') + '. Text a spreadsheet would read as a formula starts with `\'`. See docs/api.md "Exports".',
    success: { status: 200, description: 'The CSV file (RFC 4180, UTF-8, a header row)', mediaType: 'text/csv', schema: csvFile(CUSTOMER_COLUMNS) },
  },
  {
    method: 'get', path: '/exports/ledger.csv', operationId: 'ledgerExport', tag: 'Exports', summary: 'The ledger entries of a period, as CSV',
    description: 'Entries created at or after `from` and before `to`, oldest first, streamed as an attachment. Columns: ' + LEDGER_COLUMNS.join(', ') + '.',
    query: z.object({
      from: z.string().meta({ param: { required: true }, description: 'An ISO 8601 date-time with its offset, or a date (its start in UTC); included', example: '2026-11-01T00:00:00Z' }),
      to: z.string().meta({ param: { required: true }, description: 'As `from`, and after it; excluded', example: '2026-12-01' }),
    }),
    success: { status: 200, description: 'The CSV file (RFC 4180, UTF-8, a header row)', mediaType: 'text/csv', schema: csvFile(LEDGER_COLUMNS) },
  },
];

/** The errors a route can give: its own, plus those of authentication, limits, bodies and idempotency. */
function errorCodes(route: Route): Map<number, Set<string>> {
  const codes = new Map<number, Set<string>>();
  const add = (status: number, list: readonly string[]) => {
    const set = codes.get(status) ?? new Set<string>();
    for (const code of list) set.add(code);
    codes.set(status, set);
  };
  add(401, ['unauthorized']);
  add(429, ['rate_limited']);
  add(503, ['service_unavailable']);
  if (route.query || route.params || route.body) add(400, ['validation_error']);
  if (route.body) {
    add(400, ['malformed_json', 'unsupported_content_type', 'bad_request']);
    add(413, ['payload_too_large']);
  }
  if (route.method === 'post' || route.method === 'put') {
    add(400, ['validation_error']); // a malformed Idempotency-Key
    add(409, ['idempotency_key_in_use']);
    add(422, ['idempotency_key_reused']);
  }
  for (const [status, list] of Object.entries(route.errors ?? {})) add(Number(status), list!);
  return codes;
}

function operation(route: Route): ZodOpenApiOperationObject {
  type StatusKey = `${1 | 2 | 3 | 4 | 5}${string}`;
  const success = (description: string) => ({
    description,
    headers: z.object({ ...rateLimitHeaders, ...(route.method === 'post' || route.method === 'put' ? replayed : {}) }),
    content: { [route.success.mediaType ?? 'application/json']: { schema: route.success.schema } },
  });
  const responses: ZodOpenApiOperationObject['responses'] = {
    [`${route.success.status}` as StatusKey]: success(route.success.description),
    ...(route.success.created ? { '201': success('Created') } : {}),
  };
  for (const [status, codes] of [...errorCodes(route)].sort(([a], [b]) => a - b)) {
    // 401 comes before the rate limiter counts the request; 429 says when to come back.
    const headers = status === 401 ? undefined : z.object({ ...rateLimitHeaders, ...(status === 429 || status === 503 ? retryAfter : {}) });
    responses[`${status}` as StatusKey] = {
      description: `${STATUS_TEXT[status] ?? 'Error'}: ${[...codes].map((c) => `\`${c}\``).join(', ')}`,
      ...(headers ? { headers } : {}),
      content: { 'application/json': { schema: errorBody(status, [...codes]) } },
    };
  }
  return {
    operationId: route.operationId,
    tags: [route.tag],
    summary: route.summary,
    ...(route.description ? { description: route.description } : {}),
    requestParams: {
      ...(route.query ? { query: route.query } : {}),
      ...(route.params ? { path: route.params } : {}),
      ...(route.method === 'post' || route.method === 'put' ? { header: z.object({ 'Idempotency-Key': idempotencyKey.optional() }) } : {}),
    },
    ...(route.body
      ? {
          requestBody: {
            required: !route.body.optional,
            content: { 'application/json': { schema: route.body.schema, ...(route.body.example ? { example: route.body.example } : {}) } },
          },
        }
      : {}),
    responses,
  };
}

/** `/webhooks/subscriptions/:id` as OpenAPI writes it, under the prefix. */
export function openApiPath(fastifyPath: string): string {
  return REST_PREFIX + fastifyPath.replace(/:(\w+)/g, '{$1}');
}

/** Where `npm start` listens unless told otherwise (PORT, HOST). */
const DEFAULT_ORIGIN = 'http://127.0.0.1:3000';

/**
 * Without a servers entry a generated client calls `/` of nowhere in particular. The origin is a
 * variable: the served document defaults it to the server that serves it (so /docs calls itself).
 */
function server(origin: string) {
  return {
    url: '{origin}',
    description: 'The loyalty service: scheme, host and port of your deployment',
    variables: { origin: { default: origin, description: `\`npm start\` listens on ${DEFAULT_ORIGIN} unless PORT or HOST say otherwise` } },
  };
}

/** `points/added` → `pointsAddedWebhook`: webhooks need operation ids too, for generated receivers. */
function webhookOperationId(topic: string): string {
  return `${topic.replace(/[/_](\w)/g, (_, c: string) => c.toUpperCase())}Webhook`;
}

/** The Shopify connector's endpoint: Shopify calls it, signed with the shop's secret, not with an API key. */
function shopifyWebhookOperation() {
  const error = (status: number, codes: string[], description: string) => ({ description, content: { 'application/json': { schema: errorBody(status, codes) } } });
  return {
    operationId: 'shopifyWebhookReceive',
    tags: ['Orders'],
    summary: 'Receive a Shopify webhook (the Shopify connector)',
    description:
      'The address to give Shopify for `orders/create`, `orders/paid`, `orders/updated`, `orders/cancelled`, `refunds/create`, `customers/create` and `customers/update`. ' +
      'The webhook is stored before the answer and applied after (docs/api.md, "Shopify connector").',
    security: [],
    requestParams: {
      header: z.object({
        'X-Shopify-Shop-Domain': z.string().meta({ description: 'The store, as connected with `shopifySettingsUpdate`' }),
        'X-Shopify-Hmac-Sha256': z.string().meta({ description: 'Base64 HMAC-SHA256 of the raw body with the shop\'s Shopify webhook secret' }),
        'X-Shopify-Topic': z.string(),
        'X-Shopify-Webhook-Id': z.string().meta({ description: 'A second delivery of the same id is a duplicate' }),
        'X-Shopify-Triggered-At': z.string().optional().meta({ description: 'More than 72 hours ago: stored as a rejected replay' }),
      }),
    },
    requestBody: { required: true, content: { 'application/json': { schema: z.record(z.string(), z.unknown()).meta({ description: 'Shopify\'s Order, Refund or Customer, as its Admin REST API shapes it' }) } } },
    responses: {
      200: {
        description: 'Stored (`accepted`), already received (`duplicate`), or stored as refused with its reason (`rejected`)',
        content: { 'application/json': { schema: z.strictObject({ success: z.literal(true), message: z.string(), status: z.enum(['accepted', 'duplicate', 'rejected']), id: z.string() }) } },
      },
      400: error(400, ['validation_error'], 'A required X-Shopify-* header is missing, or a body the database cannot store (not UTF-8, a NUL byte, a \\u0000 escape or lone surrogate, nesting deeper than 64): nothing is stored'),
      401: error(401, ['shopify_signature_invalid'], 'The HMAC does not match, or no shop is connected to the domain (the same answer): nothing is stored'),
    },
  };
}

function buildDocument() {
  const paths: ZodOpenApiPathsObject = {};
  for (const route of REST_ROUTES) {
    const path = openApiPath(route.path);
    paths[path] = { ...paths[path], [route.method]: operation(route) };
  }
  paths[SHOPIFY_WEBHOOKS_PATH] = { post: shopifyWebhookOperation() };
  // Each topic's delivery, as OpenAPI 3.1 describes outgoing webhooks.
  const webhooks: ZodOpenApiPathsObject = Object.fromEntries(
    Object.entries(EVENT_TOPICS).map(([topic, description]) => [
      topic,
      {
        post: {
          operationId: webhookOperationId(topic),
          summary: description,
          security: [], // sent by us, not called with an API key
          description: 'Signed per Standard Webhooks: `webhook-id`, `webhook-timestamp`, `webhook-signature` (see docs/webhooks.md). Answer 2xx within the timeout, or the delivery is retried.',
          requestBody: { content: { 'application/json': { schema: webhookEventSchema } } },
          responses: { 200: { description: 'Received' } },
        },
      },
    ]),
  );
  return createDocument({
    openapi: '3.1.0',
    info: {
      title: 'Loyalty service REST API',
      version: '1',
      description:
        'Points, redemptions, referrals and webhook subscriptions of one shop. Every request carries `Authorization: Bearer <API key>`. ' +
        'Errors always have one shape: `{ success: false, statusCode, error, message }` (plus `details` for `validation_error`). ' +
        'Also here: [GraphiQL](/graphql), the [live events dashboard](/dashboard).',
    },
    tags: [
      { name: 'Points', description: 'Add, subtract and set balances; each change returns its ledger entry' },
      { name: 'Redemptions', description: 'Ways to redeem, redeeming for a discount code, and cancelling one' },
      { name: 'Referrals', description: 'Referral codes and referees' },
      { name: 'Webhooks', description: 'Subscriptions, the topic catalog and delivery records' },
      { name: 'Orders', description: 'Orders as the shop sends them, the earning rules, and the points they earn' },
      { name: 'Storefront', description: 'Customer access tokens, for a storefront in the browser' },
      { name: 'Data rights', description: 'A customer\'s data, out as one document, and their erasure' },
    ],
    servers: [server(DEFAULT_ORIGIN)],
    security: [{ apiKey: [] }],
    components: {
      securitySchemes: {
        apiKey: { type: 'http', scheme: 'bearer', bearerFormat: 'lk_<prefix>_<secret>', description: 'The shop\'s API key (`npm run cli -- key create`)' },
      },
    },
    paths,
    webhooks,
  });
}

let document: ReturnType<typeof buildDocument> | undefined;

/** Built on first use, then the same object. */
export function openApiDocument(): ReturnType<typeof buildDocument> {
  document ??= buildDocument();
  return document;
}

/** The document as a running server serves it: the servers entry defaults to `origin`, that server. */
export function servedOpenApiDocument(origin: string): ReturnType<typeof buildDocument> {
  return { ...openApiDocument(), servers: [server(origin)] };
}
