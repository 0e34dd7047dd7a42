import type { Customer as CustomerShape } from '../domain/customers/index.js';
import type { Activity as ActivityShape } from '../domain/ledger/index.js';
import { cancelDiscountCode, CODE_STATUSES, type DiscountCode as DiscountCodeShape, listDiscountCodesOfCustomers } from '../domain/codes/index.js';
import { redeemPoints } from '../domain/rewards/index.js';
import { Activity } from './activity.js';
import { actorOf, BATCH_ONLY, builder, STOREFRONT } from './builder.js';
import { connectionsOf, PAGE_ARGS } from './connections.js';
import { Customer } from './customer.js';
import { PointsRedemptionType } from './redemption.js';
import { UserError, type UserErrorShape, withUserErrors } from './user-errors.js';

const DiscountCodeStatus = builder.enumType('DiscountCodeStatus', {
  subGraphs: STOREFRONT,
  description: 'A code\'s life: issued, then exactly one of used (by an order), expired or cancelled (by the shop); none is undone.',
  values: CODE_STATUSES,
});

const ShopifySyncState = builder.enumType('ShopifySyncState', {
  subGraphs: STOREFRONT,
  description: 'A code\'s copy in Shopify: pending, synced (usable at Shopify\'s checkout) or failed (refused by Shopify).',
  values: ['pending', 'synced', 'failed'] as const,
});

/** A code issued by a redemption: what pointsRedeem returns and the redemptions/* events carry. */
export const DiscountCode = builder.objectRef<DiscountCodeShape>('DiscountCode').implement({
  subGraphs: STOREFRONT,
  description: 'A discount code bought with points.',
  fields: (t) => ({
    _id: t.exposeID('_id'),
    code: t.exposeString('code'),
    value: t.exposeFloat('value', { description: 'The discount: an amount, a percentage or a shipping value, per `type`.' }),
    type: t.field({ type: PointsRedemptionType, resolve: (d) => d.type }),
    currency: t.exposeString('currency', { nullable: true, description: 'The currencyActive given when redeeming.' }),
    variantId: t.exposeString('variantId', { nullable: true, description: 'The product variant of a free_product code.' }),
    reward: t.exposeID('reward', { description: 'The `_id` of the PointsRedemption it came from.' }),
    pointsAmount: t.exposeInt('pointsAmount', { description: 'Points spent.' }),
    customer: t.exposeID('customer', { description: 'The customer `_id`.' }),
    activity: t.exposeID('activity', { description: 'The `_id` of the redeem_points ledger entry.' }),
    expiresAt: t.expose('expiresAt', { type: 'DateTime', nullable: true }),
    createdAt: t.expose('createdAt', { type: 'DateTime' }),
    status: t.field({ type: DiscountCodeStatus, resolve: (d) => d.status }),
    usedAt: t.expose('usedAt', { type: 'DateTime', nullable: true, description: 'When an order used it.' }),
    orderId: t.exposeString('orderId', {
      nullable: true,
      description: 'The shop\'s id of the order that used it. On the storefront, null when another customer\'s order used it: that order is theirs.',
    }),
    usedByOtherCustomer: t.exposeBoolean('usedByOtherCustomer', { description: 'An order of another customer used it: the checkout let it through.' }),
    cancelledAt: t.expose('cancelledAt', { type: 'DateTime', nullable: true }),
    pointsReturned: t.exposeBoolean('pointsReturned', { description: 'Its points came back to the customer (a refund_redemption ledger entry).' }),
    shopifySync: t.field({
      type: ShopifySyncState,
      nullable: true,
      description: 'Its copy in Shopify\'s checkout: pending until Shopify confirms it (usable there once synced); failed when Shopify refused it (then cancelled, its points back). Null: the shop has no Shopify Admin connection.',
      resolve: (d) => d.shopifySync,
    }),
    shopifyId: t.exposeString('shopifyId', { nullable: true, subGraphs: ['admin'], description: 'Its id in Shopify, once synced.' }),
    shopifyError: t.exposeString('shopifyError', { nullable: true, subGraphs: ['admin'], description: 'Why Shopify refused it.' }),
  }),
});

const DiscountCodeConnection = builder.connectionObject({ type: DiscountCode, name: 'DiscountCodeConnection', subGraphs: STOREFRONT }, { name: 'DiscountCodeEdge', subGraphs: STOREFRONT });

builder.objectFields(Customer, (t) => ({
  discountCodes: t.loadable({
    type: DiscountCodeConnection,
    description: 'Codes the customer bought with points, newest first.',
    args: PAGE_ARGS,
    byPath: true,
    loaderOptions: BATCH_ONLY,
    load: (customerIds: string[], ctx, args) =>
      connectionsOf(args, (page) => listDiscountCodesOfCustomers(ctx.db, ctx.shop.id, customerIds, page, ctx.customer ? 'customer' : 'shop')),
    resolve: (customer) => customer._id,
  }),
}));

const PointsRedeemInput = builder.inputType('PointsRedeemInput', {
  fields: (t) => ({
    customerIdentifier: t.string({ description: 'Shop customer id or e-mail.' }),
    pointsAmount: t.int({ description: 'Points to spend: the reward cost, or a multiple of it for variable rewards.' }),
    rewardId: t.id({ description: 'The `_id` of a PointsRedemption.' }),
    variantId: t.string({ required: false, description: 'Required for, and only used by, free_product rewards.' }),
    currencyActive: t.string({ required: false, description: 'ISO 4217 code stored on the discount code.' }),
  }),
});

export const PointsRedeemPayload = builder
  .objectRef<{ discountCode?: DiscountCodeShape; activity?: ActivityShape; customer?: CustomerShape; userErrors: UserErrorShape[] }>(
    'PointsRedeemPayload',
  )
  .implement({
  subGraphs: STOREFRONT,
    fields: (t) => ({
      discountCode: t.field({ type: DiscountCode, nullable: true, resolve: (p) => p.discountCode ?? null }),
      activity: t.field({ type: Activity, nullable: true, resolve: (p) => p.activity ?? null }),
      customer: t.field({ type: Customer, nullable: true, resolve: (p) => p.customer ?? null }),
      userErrors: t.field({ type: [UserError], resolve: (p) => p.userErrors }),
    }),
  });

builder.mutationFields((t) => ({
  pointsRedeem: t.field({
    type: PointsRedeemPayload,
    description: 'Spends points on a discount code, like POST /pointsRedemptions.',
    args: { input: t.arg({ type: PointsRedeemInput, required: true }) },
    resolve: (_root, { input }, ctx) => withUserErrors(() => redeemPoints(ctx.db, ctx.shop.id, input, actorOf(ctx))),
  }),
}));

const DiscountCodeCancelInput = builder.inputType('DiscountCodeCancelInput', {
  fields: (t) => ({
    code: t.string({ description: 'The code, as issued.' }),
    returnPoints: t.boolean({ required: false, description: 'Give its points back to its customer (a refund_redemption ledger entry); false by default.' }),
  }),
});

const DiscountCodeCancelPayload = builder.objectRef<{ discountCode?: DiscountCodeShape; activity?: ActivityShape | null; userErrors: UserErrorShape[] }>('DiscountCodeCancelPayload').implement({
  fields: (t) => ({
    discountCode: t.field({ type: DiscountCode, nullable: true, resolve: (p) => p.discountCode ?? null }),
    activity: t.field({ type: Activity, nullable: true, description: 'The refund_redemption entry; null without returnPoints.', resolve: (p) => p.activity ?? null }),
    userErrors: t.field({ type: [UserError], resolve: (p) => p.userErrors }),
  }),
});

builder.mutationFields((t) => ({
  discountCodeCancel: t.field({
    type: DiscountCodeCancelPayload,
    description: 'Cancels an issued code, its points optionally returned, like POST /pointsRedemptions/{code}/cancel. A used, expired or cancelled code is the userError code_not_issued.',
    args: { input: t.arg({ type: DiscountCodeCancelInput, required: true }) },
    resolve: (_root, { input }, ctx) => withUserErrors(() => cancelDiscountCode(ctx.db, ctx.shop.id, input.code, { returnPoints: input.returnPoints ?? false }, actorOf(ctx))),
  }),
}));
