import { REDEMPTION_TYPES } from '../domain/codes/index.js';
import { APPLY_PRODUCT_OPTIONS, createPointsRedemption, deletePointsRedemption, DISCOUNT_COMBINATIONS, EXCHANGE_TYPES, EXPIRE_DATE_TYPES, listPointsRedemptions, MINIMUM_REQUIREMENT_TYPES, type PointsRedemption as PointsRedemptionShape, PURCHASE_TYPES, updatePointsRedemption } from '../domain/rewards/index.js';
import { actorOf, builder, STOREFRONT } from './builder.js';
import { forwardPageArgs, PAGE_ARGS, toConnection } from './connections.js';
import { deletePayload, UserError, type UserErrorShape, withUserErrors } from './user-errors.js';

export const PointsRedemptionType = builder.enumType('PointsRedemptionType', { subGraphs: STOREFRONT, values: REDEMPTION_TYPES });
const ExchangeType = builder.enumType('PointsRedemptionExchangeType', { subGraphs: STOREFRONT, values: EXCHANGE_TYPES });
const PurchaseType = builder.enumType('PurchaseType', { subGraphs: STOREFRONT, values: PURCHASE_TYPES });
const ApplyProductOption = builder.enumType('ApplyProductOption', { subGraphs: STOREFRONT, values: APPLY_PRODUCT_OPTIONS });
const MinimumRequirementType = builder.enumType('MinimumRequirementType', { subGraphs: STOREFRONT, values: MINIMUM_REQUIREMENT_TYPES });
const ExpireDateType = builder.enumType('ExpireDateType', { subGraphs: STOREFRONT, values: EXPIRE_DATE_TYPES });
const DiscountCombination = builder.enumType('DiscountCombination', { subGraphs: STOREFRONT, values: DISCOUNT_COMBINATIONS });

/** The contract's points redemption record, field for field. */
export const PointsRedemption = builder.objectRef<PointsRedemptionShape>('PointsRedemption').implement({
  subGraphs: STOREFRONT,
  description: 'A way to redeem points for a discount code.',
  fields: (t) => ({
    _id: t.exposeID('_id', { description: 'Pass as `rewardId` to pointsRedeem.' }),
    redeemable: t.exposeBoolean('redeemable', {
      description: 'Active and affordable for the customer asked about; false when no customer is in scope.',
    }),
    status: t.exposeBoolean('status', { description: 'Whether the option is active.' }),
    name: t.exposeString('name'),
    type: t.field({ type: PointsRedemptionType, resolve: (r) => r.type }),
    discountPrefix: t.exposeString('discountPrefix', { description: 'Start of every code this option issues.' }),
    exchangeType: t.field({
      type: ExchangeType,
      description: 'fixed: costs exactly rewardValue. variable: any multiple of rewardValue, discountValue per step.',
      resolve: (r) => r.exchangeType,
    }),
    rewardValue: t.exposeInt('rewardValue', { description: 'Points per redemption (fixed) or per step (variable).' }),
    discountValue: t.exposeFloat('discountValue', { description: 'Discount per redemption (fixed) or per step (variable).' }),
    purchaseType: t.field({ type: PurchaseType, resolve: (r) => r.purchaseType }),
    applyProductOption: t.field({ type: ApplyProductOption, resolve: (r) => r.applyProductOption }),
    applyProducts: t.exposeStringList('applyProducts', { description: 'Product ids.' }),
    applyCollections: t.exposeStringList('applyCollections', { description: 'Collection ids.' }),
    applyVariants: t.exposeStringList('applyVariants', { description: 'Variant ids; for free_product, the variants on offer.' }),
    minimumRequirementType: t.field({ type: MinimumRequirementType, resolve: (r) => r.minimumRequirementType }),
    minimumRequirementValue: t.exposeFloat('minimumRequirementValue', { nullable: true }),
    combinations: t.field({ type: [DiscountCombination], resolve: (r) => r.combinations }),
    expireDateType: t.field({ type: ExpireDateType, resolve: (r) => r.expireDateType }),
    expireDays: t.exposeInt('expireDays', { nullable: true, description: 'Codes expire this many days after issue.' }),
    expireDate: t.expose('expireDate', { type: 'DateTime', nullable: true, description: 'Codes expire, and the option closes, at this instant.' }),
    sortIndex: t.exposeInt('sortIndex'),
    createdAt: t.expose('createdAt', { type: 'DateTime' }),
    updatedAt: t.expose('updatedAt', { type: 'DateTime' }),
  }),
});

export const PointsRedemptionConnection = builder.connectionObject(
  { type: PointsRedemption, name: 'PointsRedemptionConnection', subGraphs: STOREFRONT },
  { name: 'PointsRedemptionEdge', subGraphs: STOREFRONT },
);

/** One input shape for create (name, type, rewardValue required) and update (the option's id, then everything optional). */
function pointsRedemptionInput(name: string, create: boolean) {
  return builder.inputType(name, {
    fields: (t) => ({
      ...(create ? {} : { id: t.id({ description: 'The `_id` of the option to change.' }) }),
      name: t.string({ required: create }),
      type: t.field({ type: PointsRedemptionType, required: create }),
      rewardValue: t.int({ required: create }),
      discountPrefix: t.string({ required: false }),
      status: t.boolean({ required: false }),
      exchangeType: t.field({ type: ExchangeType, required: false }),
      discountValue: t.float({ required: false }),
      purchaseType: t.field({ type: PurchaseType, required: false }),
      applyProductOption: t.field({ type: ApplyProductOption, required: false }),
      applyProducts: t.stringList({ required: false }),
      applyCollections: t.stringList({ required: false }),
      applyVariants: t.stringList({ required: false }),
      minimumRequirementType: t.field({ type: MinimumRequirementType, required: false }),
      minimumRequirementValue: t.float({ required: false }),
      combinations: t.field({ type: [DiscountCombination], required: false }),
      expireDateType: t.field({ type: ExpireDateType, required: false }),
      expireDays: t.int({ required: false }),
      expireDate: t.field({ type: 'DateTime', required: false }),
      sortIndex: t.int({ required: false, description: 'Position in lists; appended after the last option when omitted.' }),
    }),
  });
}

const PointsRedemptionInput = pointsRedemptionInput('PointsRedemptionInput', true);
const PointsRedemptionUpdateInput = pointsRedemptionInput('PointsRedemptionUpdateInput', false);

const PointsRedemptionDeleteInput = builder.inputType('PointsRedemptionDeleteInput', {
  fields: (t) => ({ id: t.id({ description: 'The `_id` of the option to delete.' }) }),
});

function pointsRedemptionPayload(name: string) {
  return builder.objectRef<{ pointsRedemption?: PointsRedemptionShape; userErrors: UserErrorShape[] }>(name).implement({
    fields: (t) => ({
      pointsRedemption: t.field({ type: PointsRedemption, nullable: true, resolve: (p) => p.pointsRedemption ?? null }),
      userErrors: t.field({ type: [UserError], resolve: (p) => p.userErrors }),
    }),
  });
}

builder.queryFields((t) => ({
  pointsRedemptions: t.field({
    type: PointsRedemptionConnection,
    description: 'The shop\'s redemption options by sortIndex, like GET /pointsRedemptions.',
    args: {
      ...PAGE_ARGS,
      customerIdentifier: t.arg.string({ required: false, description: 'The customer `redeemable` is computed for.' }),
      },
      resolve: async (_root, args, ctx) =>
        toConnection(
          await listPointsRedemptions(ctx.db, ctx.shop.id, { ...forwardPageArgs(args), customerIdentifier: args.customerIdentifier }),
        ),
  }),
}));

builder.mutationFields((t) => ({
  pointsRedemptionCreate: t.field({
    type: pointsRedemptionPayload('PointsRedemptionCreatePayload'),
    description: 'Adds a way to redeem points.',
    args: { input: t.arg({ type: PointsRedemptionInput, required: true }) },
    resolve: (_root, { input }, ctx) => withUserErrors(() => createPointsRedemption(ctx.db, ctx.shop.id, input, actorOf(ctx))),
  }),
  pointsRedemptionUpdate: t.field({
    type: pointsRedemptionPayload('PointsRedemptionUpdatePayload'),
    description: 'Changes the given fields of a redemption option.',
    args: { input: t.arg({ type: PointsRedemptionUpdateInput, required: true }) },
    resolve: (_root, { input: { id, ...input } }, ctx) => withUserErrors(() => updatePointsRedemption(ctx.db, ctx.shop.id, String(id), input, actorOf(ctx))),
  }),
  pointsRedemptionDelete: t.field({
    type: deletePayload('PointsRedemptionDeletePayload', 'deletedPointsRedemptionId'),
    description: 'Removes a redemption option; codes it issued stay valid.',
    args: { input: t.arg({ type: PointsRedemptionDeleteInput, required: true }) },
    resolve: (_root, { input }, ctx) =>
      withUserErrors(async () => {
        await deletePointsRedemption(ctx.db, ctx.shop.id, String(input.id), actorOf(ctx));
        return { deletedId: String(input.id) };
      }),
  }),
}));
