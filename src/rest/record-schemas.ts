import { z } from 'zod';
import type { Customer } from '../domain/customers/index.js';
import { EVENT_TOPICS } from '../domain/kernel/index.js';
import { type Activity, ACTIVITY_TYPES } from '../domain/ledger/index.js';
import { type Order, type OrderDiscountCode, ORDER_STATUSES, type OrderLine } from '../domain/orders/index.js';
import { ACTION_LIMITS, EARNING_RULE_TYPES, type EarningRule, type Tier, TIER_METRICS, TIER_WINDOWS } from '../domain/program/index.js';
import { CODE_STATUSES, type DiscountCode, REDEMPTION_TYPES } from '../domain/codes/index.js';
import { APPLY_PRODUCT_OPTIONS, CHECK_REASONS, type DiscountCodeCheck, DISCOUNT_COMBINATIONS, EXCHANGE_TYPES, EXPIRE_DATE_TYPES, MINIMUM_REQUIREMENT_TYPES, type PointsRedemption, PURCHASE_TYPES, type Referee } from '../domain/rewards/index.js';
import { DELIVERY_STATUSES, type WebhookDelivery, type WebhookDeliveryAttempt, type WebhookSubscription, type WebhookSubscriptionWithSecret } from '../domain/webhooks/index.js';

/**
 * The domain records as the REST API sends them (JSON: dates become ISO strings), for the OpenAPI
 * document. Each `satisfies` ties a schema to its domain type, so a field added to the domain
 * without its schema fails the type check; test/openapi.test.ts checks real responses against them.
 */

/** A domain record after JSON.stringify. */
type Json<T> = { [K in keyof T]: T[K] extends Date ? string : T[K] extends Date | null ? string | null : T[K] };

export const idSchema = z
  .string()
  .regex(/^[0-9a-f]{24}$/)
  .meta({ id: 'Id', description: '24 lowercase hex characters', example: '019aa9c3e5f2d1c7a8b9e0f1' });
// `format: date-time` says it; zod's long equivalent pattern would only clutter the reference.
export const timestampSchema = z.iso.datetime().meta({
  id: 'Timestamp',
  description: 'ISO 8601, UTC, milliseconds',
  example: '2026-11-22T10:29:31.927Z',
  override: ({ jsonSchema }: { jsonSchema: Record<string, unknown> }) => {
    delete jsonSchema.pattern;
  },
});

export const activitySchema = z
  .strictObject({
    _id: idSchema,
    type: z.enum(ACTIVITY_TYPES),
    settingType: z.enum(['api', 'import', 'redemption', 'referral', 'order', 'rule']).meta({ description: 'Where the change came from' }),
    description: z.string().nullable(),
    note: z.string().nullable(),
    oldPoints: z.int().min(0).meta({ description: 'Balance before the change' }),
    newPoints: z.int().min(0).meta({ description: 'Balance after the change' }),
    customer: idSchema.meta({ description: 'The customer `_id`' }),
    shop: z.string().meta({ description: 'The shop id' }),
    createdAt: timestampSchema,
    updatedAt: timestampSchema,
  })
  .meta({ id: 'Activity', description: 'A ledger entry: one change of a customer\'s balance' }) satisfies z.ZodType<Json<Activity>>;

export const customerSchema = z
  .strictObject({
    _id: idSchema,
    shopifyCustomerId: z.string(),
    email: z.email(),
    birthday: z.iso.date().nullable(),
    points: z.int().min(0),
    pendingPoints: z.int().min(0).meta({ description: 'Earned from orders, spendable once the shop\'s `pendingDays` have passed; not in `points`' }),
    createdAt: timestampSchema,
    updatedAt: timestampSchema,
  })
  .meta({ id: 'Customer' }) satisfies z.ZodType<Json<Customer>>;

export const pointsRedemptionSchema = z
  .strictObject({
    _id: idSchema.meta({ description: 'Pass as `rewardId` to redeem' }),
    redeemable: z.boolean().meta({ description: 'Active, not expired, and the customer\'s balance covers `rewardValue`' }),
    status: z.boolean().meta({ description: 'Whether the option is active' }),
    name: z.string(),
    type: z.enum(REDEMPTION_TYPES),
    discountPrefix: z.string(),
    exchangeType: z.enum(EXCHANGE_TYPES),
    rewardValue: z.int().min(1).meta({ description: 'Points per redemption (fixed) or per step (variable)' }),
    discountValue: z.number().min(0).meta({ description: 'Discount per redemption (fixed) or per step (variable)' }),
    purchaseType: z.enum(PURCHASE_TYPES),
    applyProductOption: z.enum(APPLY_PRODUCT_OPTIONS),
    applyProducts: z.array(z.string()),
    applyCollections: z.array(z.string()),
    applyVariants: z.array(z.string()),
    minimumRequirementType: z.enum(MINIMUM_REQUIREMENT_TYPES),
    minimumRequirementValue: z.number().nullable(),
    combinations: z.array(z.enum(DISCOUNT_COMBINATIONS)),
    expireDateType: z.enum(EXPIRE_DATE_TYPES),
    expireDays: z.int().nullable(),
    expireDate: timestampSchema.nullable(),
    sortIndex: z.int().min(0),
    createdAt: timestampSchema,
    updatedAt: timestampSchema,
  })
  .meta({ id: 'PointsRedemption', description: 'A way to redeem points, flagged for the customer asked about' }) satisfies z.ZodType<
  Json<PointsRedemption>
>;

export const discountCodeSchema = z
  .strictObject({
    _id: idSchema,
    code: z.string().meta({ description: 'The reward\'s `discountPrefix` and 10 characters' }),
    value: z.number(),
    type: z.enum(REDEMPTION_TYPES),
    currency: z.string().nullable(),
    variantId: z.string().nullable(),
    reward: idSchema.meta({ description: 'The redemption option `_id`' }),
    pointsAmount: z.int(),
    customer: idSchema,
    activity: idSchema.meta({ description: 'The `redeem_points` ledger entry' }),
    expiresAt: timestampSchema.nullable(),
    createdAt: timestampSchema,
    status: z.enum(CODE_STATUSES).meta({ description: 'issued, then exactly one of used (by an order), expired, cancelled' }),
    usedAt: timestampSchema.nullable(),
    orderId: z.string().nullable().meta({ description: 'The shop\'s id of the order that used it' }),
    usedByOtherCustomer: z.boolean().meta({ description: 'Used by an order of another customer than the one it was issued to' }),
    cancelledAt: timestampSchema.nullable(),
    pointsReturned: z.boolean().meta({ description: 'Its points came back to the customer (a `refund_redemption` entry)' }),
    shopifySync: z.enum(['pending', 'synced', 'failed']).nullable().meta({ description: 'Its copy in Shopify: pending until Shopify confirms it, synced, or failed (Shopify refused it: cancelled, its points back). Null: no Shopify Admin connection' }),
    shopifyId: z.string().nullable().meta({ description: 'Its id in Shopify, once synced' }),
    shopifyError: z.string().nullable().meta({ description: 'Why Shopify refused it' }),
  })
  .meta({ id: 'DiscountCode' }) satisfies z.ZodType<Json<DiscountCode>>;

export const refereeSchema = z
  .strictObject({
    id: idSchema.meta({ description: 'The referral record' }),
    status: z.boolean(),
    referralCode: z.string(),
    birthday: z.iso.date().nullable(),
    shopifyCustomerId: z.string(),
    points: z.int().min(0),
    email: z.email(),
    latestActivity: timestampSchema,
    createdAt: timestampSchema,
    updatedAt: timestampSchema,
  })
  .meta({ id: 'Referee' }) satisfies z.ZodType<Json<Referee>>;

const subscriptionFields = {
  id: idSchema,
  topic: z.string().meta({ description: 'A catalog topic or `<group>/*`', example: 'points/*' }),
  callbackUrl: z.url().meta({ example: 'https://shop.example.com/hooks/loyalty' }),
  previousSecretValidUntil: timestampSchema.nullable().meta({ description: 'When rotated-out secrets stop being accepted; null if never rotated' }),
  status: z.enum(['enabled', 'probing', 'disabled']).meta({
    description: '`probing` after 5 consecutive failures (one attempt at a time until a success); `disabled` after 5 days without a success (nothing is attempted, deliveries are kept; update the URL or POST …/enable)',
  }),
  disabledReason: z.string().nullable().meta({ description: 'Why it was disabled; null unless disabled' }),
  createdAt: timestampSchema,
  updatedAt: timestampSchema,
};

export const webhookSubscriptionSchema = z
  .strictObject(subscriptionFields)
  .meta({ id: 'WebhookSubscription' }) satisfies z.ZodType<Json<WebhookSubscription>>;

export const webhookSubscriptionWithSecretSchema = z
  .strictObject({
    ...subscriptionFields,
    signingSecret: z
      .string()
      .regex(/^[0-9a-f]{64}$/)
      .meta({ description: 'Shown only in the create and rotate responses: keep it' }),
  })
  .meta({ id: 'WebhookSubscriptionWithSecret' }) satisfies z.ZodType<Json<WebhookSubscriptionWithSecret>>;

export const webhookTopicSchema = z.strictObject({ topic: z.enum(Object.keys(EVENT_TOPICS) as [keyof typeof EVENT_TOPICS]), description: z.string() }).meta({ id: 'WebhookTopic' });

export const webhookDeliverySchema = z
  .strictObject({
    id: idSchema,
    subscriptionId: idSchema,
    eventId: z.string().meta({ description: 'The `webhook-id` header of every attempt', example: 'evt_…' }),
    topic: z.string(),
    status: z.enum(DELIVERY_STATUSES),
    attemptCount: z.int().min(0),
    lastAttemptAt: timestampSchema.nullable(),
    nextAttemptAt: timestampSchema.nullable(),
    lastResponseStatus: z.int().nullable(),
    lastError: z.string().nullable(),
    createdAt: timestampSchema,
    updatedAt: timestampSchema,
  })
  .meta({ id: 'WebhookDelivery' }) satisfies z.ZodType<Json<WebhookDelivery>>;

export const webhookDeliveryAttemptSchema = z
  .strictObject({
    id: idSchema,
    attemptedAt: timestampSchema,
    trigger: z.enum(['scheduled', 'manual']),
    url: z.string(),
    responseStatus: z.int().nullable(),
    durationMs: z.number().min(0),
    error: z.string().nullable(),
    responseBody: z.string().nullable().meta({ description: 'The first 2 KiB of the receiver\'s response' }),
  })
  .meta({ id: 'WebhookDeliveryAttempt' }) satisfies z.ZodType<Json<WebhookDeliveryAttempt>>;

const moneySchema = z.string().regex(/^-?\d+(\.\d+)?$/).meta({ description: 'A decimal amount in the order\'s currency, never a float', example: '42.50' });

/** What POST /discountCodes/{code}/check answers. */
export const discountCodeCheckSchema = z
  .strictObject({
    code: z.string(),
    applicable: z.boolean(),
    reason: z.enum(CHECK_REASONS).nullable().meta({ description: 'Why not, when not applicable: the first of these that holds, in this order' }),
    currency: z.string().meta({ description: 'The cart\'s', example: 'USD' }),
    discount: moneySchema.meta({ description: 'In the cart\'s currency, rounded half up to its minor unit; zero when not applicable', example: '5.00' }),
    lineItems: z.array(z.int().min(0)).meta({ description: 'Indexes into cart.lineItems the discount is on: the eligible lines (amount, percentage), the free unit\'s line (free_product), none (shipping)' }),
  })
  .meta({ id: 'DiscountCodeCheck' }) satisfies z.ZodType<Json<DiscountCodeCheck>>;

export const orderLineSchema = z
  .strictObject({
    productId: z.string(),
    variantId: z.string().nullable(),
    collectionIds: z.array(z.string()),
    quantity: z.int().min(0),
    price: moneySchema.meta({ description: 'Per unit' }),
    discount: moneySchema.meta({ description: 'On the whole line' }),
    refundedQuantity: z.int().min(0),
    giftCard: z.boolean().meta({ description: 'A gift card sold: it earns only under a rule with includeGiftCards' }),
  })
  .meta({ id: 'OrderLine' }) satisfies z.ZodType<Json<OrderLine>>;

export const orderDiscountCodeSchema = z
  .strictObject({
    code: z.string().meta({ description: 'The code, as the order carried it' }),
    amount: moneySchema.meta({ description: 'What it took off the order' }),
  })
  .meta({ id: 'OrderDiscountCode' }) satisfies z.ZodType<Json<OrderDiscountCode>>;

export const orderSchema = z
  .strictObject({
    _id: idSchema,
    orderId: z.string().meta({ description: 'The shop\'s own order id, as in the path' }),
    customer: idSchema.meta({ description: 'The customer `_id`' }),
    currency: z.string(),
    subtotal: moneySchema,
    shipping: moneySchema,
    tax: moneySchema,
    total: moneySchema,
    refunded: moneySchema,
    status: z.enum(ORDER_STATUSES),
    test: z.boolean().meta({ description: 'A test order: it earns nothing unless the shop\'s earnOnTestOrders is on (earnNote says so)' }),
    lineItems: z.array(orderLineSchema),
    discountCodes: z.array(orderDiscountCodeSchema).meta({ description: 'The codes the order used, as given (unknown ones too); each issued code of the shop among them is used by the order' }),
    processedAt: timestampSchema.nullable(),
    pointsEarned: z.int().min(0).meta({ description: 'Net points the order\'s current state earns (pending ones included)' }),
    pointsPending: z.int().min(0).meta({ description: 'Of those, still waiting for the shop\'s pendingDays' }),
    pointsClawedBack: z.int().min(0).meta({ description: 'Taken back by refunds and cancellations, in all' }),
    unrecoveredPoints: z.int().min(0).meta({ description: 'Clawed-back points the balance no longer held: it stopped at 0' }),
    earnNote: z.string().nullable().meta({ description: 'Why the order earns nothing, when it is not obvious' }),
    createdAt: timestampSchema,
    updatedAt: timestampSchema,
  })
  .meta({ id: 'Order' }) satisfies z.ZodType<Json<Order>>;

export const earningRuleSchema = z
  .strictObject({
    _id: idSchema,
    type: z.enum(EARNING_RULE_TYPES),
    name: z.string(),
    active: z.boolean(),
    earnPoint: z.int().min(1),
    spent: moneySchema.nullable().meta({ description: 'place_order: earnPoint points per this much eligible money, in the shop\'s currency' }),
    includeProductIds: z.array(z.string()),
    excludeProductIds: z.array(z.string()),
    includeCollectionIds: z.array(z.string()),
    excludeCollectionIds: z.array(z.string()),
    includeShipping: z.boolean(),
    includeTax: z.boolean(),
    includeGiftCards: z.boolean().meta({ description: 'place_order: gift-card lines count too (default false: they never earn)' }),
    action: z.string().nullable().meta({ description: 'custom: the action the shop\'s backend reports' }),
    actionLimit: z.enum(ACTION_LIMITS).nullable(),
    createdAt: timestampSchema,
    updatedAt: timestampSchema,
  })
  .meta({ id: 'EarningRule' }) satisfies z.ZodType<Json<EarningRule>>;

const tierSchema = z
  .strictObject({
    id: idSchema,
    name: z.string(),
    threshold: z.string().meta({ description: 'points_earned: whole points; amount_spent: money in the shop\'s currency', example: '500' }),
    multiplier: z.string().meta({ description: 'place_order points × this, floored once', example: '1.5' }),
    createdAt: timestampSchema,
    updatedAt: timestampSchema,
  })
  .meta({ id: 'Tier' }) satisfies z.ZodType<Json<Tier>>;

export const customerTierSchema = z
  .strictObject({
    customer: idSchema,
    tier: tierSchema.nullable().meta({ description: 'The tier held; null: none' }),
    since: timestampSchema.nullable().meta({ description: 'When the customer reached it' }),
    metric: z.enum(TIER_METRICS),
    window: z.enum(TIER_WINDOWS),
    progress: z.strictObject({
      current: z.string().meta({ description: 'The metric over the window now (calendar_year: this year\'s)' }),
      next: tierSchema.nullable().meta({ description: 'The next tier above the one held; null at the top' }),
      remaining: z.string().nullable().meta({ description: 'What it takes to reach next' }),
    }),
    override: z
      .strictObject({
        until: timestampSchema.meta({ description: 'When it ends by itself; then the metric decides the tier again' }),
        reason: z.string().nullable().meta({ description: 'Why, as staff wrote it' }),
        createdAt: timestampSchema.meta({ description: 'When it was set' }),
      })
      .nullable()
      .meta({ description: 'While staff\'s override holds the tier (which `tier` then is); null: none' }),
  })
  .meta({ id: 'CustomerTier' });

/** A tier as tiers/changed events show it. */
const eventTierSchema = z.strictObject({ id: idSchema, name: z.string(), multiplier: z.string() }).nullable();

/** Points an order earned that wait (points/pending), or a clawback that took only pending points: no ledger entry. */
const pendingChangeSchema = z.strictObject({
  customer: idSchema,
  order: idSchema,
  points: z.int(),
  availableAt: timestampSchema.optional(),
  description: z.string().optional(),
  pendingEarn: idSchema.optional(),
  orderId: z.string().optional(),
  fromPending: z.int().optional(),
  unrecovered: z.int().optional(),
});

/** The body of a webhook delivery: `data` is the resource after the change, per topic. */
const eventEnvelope = <T extends string, D extends z.ZodType>(topics: readonly [T, ...T[]], data: D) =>
  z.strictObject({
    id: z.string().meta({ description: 'The event id, also the `webhook-id` header', example: 'evt_…' }),
    type: z.enum(topics),
    timestamp: timestampSchema,
    shopId: z.string(),
    data,
  });

export const webhookEventSchema = z
  .union([
    eventEnvelope(['points/added', 'points/subtracted', 'points/updated', 'points/earned', 'points/available', 'points/expired', 'points/refunded'], activitySchema),
    eventEnvelope(
      ['points/expiring'],
      z.strictObject({
        customer: idSchema,
        points: z.int().meta({ description: 'What will expire then, as of the warning' }),
        expiresAt: timestampSchema.meta({ description: 'When they leave the balance: the start of the shop-local day after their last one' }),
      }),
    ),
    eventEnvelope(['points/clawed_back'], z.union([activitySchema, pendingChangeSchema])),
    eventEnvelope(
      ['tiers/changed'],
      z.strictObject({
        customer: idSchema,
        previousTier: eventTierSchema.meta({ description: 'null: the customer held none' }),
        tier: eventTierSchema.meta({ description: 'null: the customer holds none now' }),
        reason: z.enum(['upgrade', 'evaluation', 'override', 'override_cleared', 'override_ended']).meta({
          description:
            'upgrade: at once, as the metric reached a threshold; evaluation: the daily evaluation (or one after the tiers or window changed); override: staff set the tier until `until`; override_cleared, override_ended: the override was cleared, or reached its end, and the metric decided',
        }),
        until: timestampSchema.optional().meta({ description: 'override: when the override ends' }),
      }),
    ),
    eventEnvelope(['points/pending'], pendingChangeSchema),
    eventEnvelope(['orders/created', 'orders/updated'], orderSchema),
    eventEnvelope(['customers/created', 'customers/updated'], customerSchema),
    eventEnvelope(['customers/erased'], z.strictObject({ customer: idSchema.meta({ description: 'The tombstone\'s `_id`' }), erasedAt: timestampSchema })),
    eventEnvelope(
      ['customers/data_requested'],
      z.strictObject({
        customer: idSchema,
        complianceRequest: idSchema.meta({ description: 'GET /complianceRequests/{id} gives the export' }),
        shopifyDataRequestId: z.string().nullable().meta({ description: 'Shopify\'s `data_request.id`' }),
      }),
    ),
    eventEnvelope(['redemptions/created', 'redemptions/used', 'redemptions/expiring', 'redemptions/expired', 'redemptions/cancelled'], discountCodeSchema),
    eventEnvelope(
      ['referrals/code_created'],
      z.strictObject({ referralCode: z.string(), customer: idSchema, shopifyCustomerId: z.string(), email: z.email(), createdAt: timestampSchema }),
    ),
    eventEnvelope(['referrals/referee_created'], refereeSchema.safeExtend({ customer: idSchema, referrer: idSchema.meta({ description: 'The referrer\'s customer `_id`' }) })),
  ])
  .meta({ id: 'WebhookEvent', description: 'What a subscription receives, signed per Standard Webhooks (docs/webhooks.md)' });

/** Shopify's compliance webhooks as answered (docs/data-rights.md). */
export const complianceRequestSchema = z
  .strictObject({
    _id: idSchema,
    topic: z.enum(['customers/data_request', 'customers/redact', 'shop/redact']),
    outcome: z.enum(['exported', 'erased', 'unknown_customer', 'shop_deletion_scheduled']),
    customer: idSchema.nullable().meta({ description: 'The customer\'s `_id` (a tombstone\'s once erased); null when the shop did not know them' }),
    shopifyDataRequestId: z.string().nullable().meta({ description: 'Shopify\'s `data_request.id`, to quote when answering it' }),
    ordersRequested: z.array(z.string()).nullable().meta({ description: 'The Shopify order ids the request names' }),
    receivedAt: timestampSchema,
  })
  .meta({ id: 'ComplianceRequest' });

export const webhookDeliveryDetailSchema = z
  .strictObject({
    ...webhookDeliverySchema.shape,
    attempts: z.array(webhookDeliveryAttemptSchema).meta({ description: 'Oldest first' }),
    payload: webhookEventSchema.nullable().meta({ description: 'The body as signed and sent; null once purged' }),
  })
  .meta({ id: 'WebhookDeliveryDetail' });
