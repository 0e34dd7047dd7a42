import type { Customer as CustomerShape } from '../domain/customers/index.js';
import type { Activity as ActivityShape } from '../domain/ledger/index.js';
import { type DiscountCode as DiscountCodeShape, listDiscountCodesOfCustomers } from '../domain/codes/index.js';
import { redeemPoints } from '../domain/rewards/index.js';
import { Activity } from './activity.js';
import { BATCH_ONLY, builder, STOREFRONT } from './builder.js';
import { connectionsOf, PAGE_ARGS } from './connections.js';
import { Customer } from './customer.js';
import { PointsRedemptionType } from './redemption.js';
import { UserError, type UserErrorShape, withUserErrors } from './user-errors.js';

/** A code issued by a redemption: what pointsRedeem returns and the redemptions/created event carries. */
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
    load: (customerIds: string[], ctx, args) => connectionsOf(args, (page) => listDiscountCodesOfCustomers(ctx.db, ctx.shop.id, customerIds, page)),
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
    resolve: (_root, { input }, ctx) => withUserErrors(() => redeemPoints(ctx.db, ctx.shop.id, input)),
  }),
}));
