import { CHECK_REASONS, checkDiscountCode, type DiscountCodeCheck as DiscountCodeCheckShape } from '../domain/rewards/index.js';
import { builder, STOREFRONT } from './builder.js';

const DiscountCodeCheckReason = builder.enumType('DiscountCodeCheckReason', { subGraphs: STOREFRONT, values: CHECK_REASONS });

/** What discountCodeCheck answers: the REST check's `check`, field for field. */
const DiscountCodeCheck = builder.objectRef<DiscountCodeCheckShape>('DiscountCodeCheck').implement({
  subGraphs: STOREFRONT,
  description: 'What a code gives for a cart, by its reward\'s terms. Asking changes nothing.',
  fields: (t) => ({
    code: t.exposeString('code'),
    applicable: t.exposeBoolean('applicable'),
    reason: t.field({
      type: DiscountCodeCheckReason,
      nullable: true,
      description: 'Why not, when not applicable: the first that holds, in the order of the enum.',
      resolve: (c) => c.reason,
    }),
    currency: t.exposeString('currency', { description: 'The cart\'s.' }),
    discount: t.exposeString('discount', { description: 'A decimal string in the cart\'s currency, rounded half up to its minor unit; zero when not applicable.' }),
    lineItems: t.exposeIntList('lineItems', {
      description: 'Indexes into cart.lineItems the discount is on: the eligible lines (amount, percentage), the free unit\'s line (free_product), none (shipping).',
    }),
  }),
});

const CartLineItemInput = builder.inputType('CartLineItemInput', {
  subGraphs: STOREFRONT,
  fields: (t) => ({
    productId: t.string(),
    variantId: t.string({ required: false }),
    collectionIds: t.stringList({ required: false }),
    quantity: t.int(),
    price: t.string({ description: 'Per unit: a decimal string in the cart\'s currency, e.g. "19.99".' }),
  }),
});

const CartInput = builder.inputType('CartInput', {
  subGraphs: STOREFRONT,
  fields: (t) => ({
    currency: t.string({ description: 'ISO 4217.' }),
    lineItems: t.field({ type: [CartLineItemInput] }),
    shippingPrice: t.string({ required: false, description: 'A decimal string in the cart\'s currency; 0 when left out.' }),
  }),
});

builder.queryFields((t) => ({
  discountCodeCheck: t.field({
    subGraphs: STOREFRONT,
    type: DiscountCodeCheck,
    description:
      'What a code gives for a cart, like POST /discountCodes/{code}/check. The admin face asks about any code of the shop; the storefront about the token\'s ' +
      'customer\'s own, and another customer\'s code answers `other_customer` and nothing more of it. Bad money in the cart is a `validation_error`.',
    args: { code: t.arg.string({ required: true }), cart: t.arg({ type: CartInput, required: true }) },
    // The storefront's context carries the token's customer; the admin's none.
    resolve: (_root, { code, cart }, ctx) => checkDiscountCode(ctx.db, ctx.shop.id, code, { cart }, ctx.customer?.customerId ?? null),
  }),
}));
