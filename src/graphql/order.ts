import { listPendingEarns, type PendingEarn as PendingEarnShape } from '../domain/ledger/index.js';
import {
  getOrder, listOrdersOfCustomers, MAX_ORDER_DISCOUNT_CODES, type Order as OrderShape, type OrderDiscountCode as OrderDiscountCodeShape, ORDER_STATUSES, type OrderLine as OrderLineShape, upsertOrder } from '../domain/orders/index.js';
import { BATCH_ONLY, builder, STOREFRONT } from './builder.js';
import { connectionsOf, forwardPageArgs, PAGE_ARGS, toConnection } from './connections.js';
import { Customer } from './customer.js';
import { UserError, type UserErrorShape, withUserErrors } from './user-errors.js';

const OrderStatus = builder.enumType('OrderStatus', { subGraphs: STOREFRONT, values: ORDER_STATUSES });

const OrderLine = builder.objectRef<OrderLineShape>('OrderLine').implement({
  subGraphs: STOREFRONT,
  fields: (t) => ({
    productId: t.exposeString('productId'),
    variantId: t.exposeString('variantId', { nullable: true }),
    collectionIds: t.exposeStringList('collectionIds'),
    quantity: t.exposeInt('quantity'),
    price: t.exposeString('price', { description: 'Per unit, a decimal string in the order\'s currency.' }),
    discount: t.exposeString('discount', { description: 'On the whole line.' }),
    refundedQuantity: t.exposeInt('refundedQuantity'),
    giftCard: t.exposeBoolean('giftCard', { description: 'A gift card sold: it earns only under a rule with includeGiftCards.' }),
  }),
});

const OrderDiscountCode = builder.objectRef<OrderDiscountCodeShape>('OrderDiscountCode').implement({
  subGraphs: STOREFRONT,
  description: 'A discount code an order used, as the shop sent it.',
  fields: (t) => ({
    code: t.exposeString('code'),
    amount: t.exposeString('amount', { description: 'What it took off the order, a decimal string in the order\'s currency.' }),
  }),
});

export const Order = builder.objectRef<OrderShape>('Order').implement({
  subGraphs: STOREFRONT,
  description: 'An order as the shop last sent it, and the points it earned. Money is a decimal string, never a float.',
  fields: (t) => ({
    _id: t.exposeID('_id'),
    orderId: t.exposeString('orderId', { description: 'The shop\'s own order id.' }),
    customer: t.exposeID('customer', { description: 'The customer `_id`.' }),
    currency: t.exposeString('currency'),
    subtotal: t.exposeString('subtotal', { description: 'After discounts.' }),
    shipping: t.exposeString('shipping'),
    tax: t.exposeString('tax'),
    total: t.exposeString('total'),
    refunded: t.exposeString('refunded'),
    status: t.field({ type: OrderStatus, resolve: (o) => o.status }),
    test: t.exposeBoolean('test', { description: 'A test order: it earns nothing unless the shop\'s earnOnTestOrders is on (earnNote says so).' }),
    lineItems: t.field({ type: [OrderLine], resolve: (o) => o.lineItems }),
    discountCodes: t.field({
      type: [OrderDiscountCode],
      description: 'The codes the order used, as given (unknown ones too); each issued code of the shop among them is used by this order.',
      resolve: (o) => o.discountCodes,
    }),
    processedAt: t.expose('processedAt', { type: 'DateTime', nullable: true }),
    pointsEarned: t.exposeInt('pointsEarned', { description: 'Net points its current state earns, pending ones included.' }),
    pointsPending: t.exposeInt('pointsPending', { description: 'Of those, still waiting for the shop\'s pendingDays.' }),
    pointsClawedBack: t.exposeInt('pointsClawedBack', { description: 'Taken back by refunds and cancellations, in all.' }),
    unrecoveredPoints: t.exposeInt('unrecoveredPoints', { description: 'Clawed-back points the balance no longer held (already spent): it stopped at 0.' }),
    earnNote: t.exposeString('earnNote', { nullable: true, description: 'Why the order earns nothing, when that is not obvious.' }),
    createdAt: t.expose('createdAt', { type: 'DateTime' }),
    updatedAt: t.expose('updatedAt', { type: 'DateTime' }),
  }),
});

const PendingEarn = builder.objectRef<PendingEarnShape>('PendingEarn').implement({
  subGraphs: STOREFRONT,
  description: 'Points an order earned that wait for the shop\'s pendingDays.',
  fields: (t) => ({
    _id: t.exposeID('_id'),
    order: t.exposeID('order', { nullable: true, description: 'The `_id` of the order that earned them.' }),
    points: t.exposeInt('points', { description: 'Still held (a refund before availableAt lowers it).' }),
    availableAt: t.expose('availableAt', { type: 'DateTime' }),
    createdAt: t.expose('createdAt', { type: 'DateTime' }),
  }),
});

const OrderConnection = builder.connectionObject({ type: Order, name: 'OrderConnection', subGraphs: STOREFRONT }, { name: 'OrderEdge', subGraphs: STOREFRONT });

builder.objectFields(Customer, (t) => ({
  pendingPoints: t.exposeInt('pendingPoints', { description: 'Earned from orders, spendable once the shop\'s pendingDays have passed; not in `points`.' }),
  pendingEarns: t.field({
    type: builder.connectionObject({ type: PendingEarn, name: 'PendingEarnConnection', subGraphs: STOREFRONT }, { name: 'PendingEarnEdge', subGraphs: STOREFRONT }),
    description: 'The points still pending, soonest available first.',
    args: PAGE_ARGS,
    resolve: async (customer, args, ctx) => toConnection(await listPendingEarns(ctx.db, ctx.shop.id, customer._id, forwardPageArgs(args))),
  }),
  orders: t.loadable({
    type: OrderConnection,
    description: 'The customer\'s orders, newest first.',
    args: PAGE_ARGS,
    byPath: true,
    loaderOptions: BATCH_ONLY,
    load: (customerIds: string[], ctx, args) => connectionsOf(args, (page) => listOrdersOfCustomers(ctx.db, ctx.shop.id, customerIds, page)),
    resolve: (customer) => customer._id,
  }),
}));

const OrderLineInput = builder.inputType('OrderLineInput', {
  fields: (t) => ({
    productId: t.string(),
    variantId: t.string({ required: false }),
    collectionIds: t.stringList({ required: false }),
    quantity: t.int(),
    price: t.string({ description: 'Per unit, a decimal string such as "19.99".' }),
    discount: t.string({ required: false, description: 'On the whole line.' }),
    refundedQuantity: t.int({ required: false }),
    giftCard: t.boolean({ required: false, description: 'A gift card sold (Shopify\'s gift_card); default false. It earns only under a rule with includeGiftCards.' }),
  }),
});

const OrderDiscountCodeInput = builder.inputType('OrderDiscountCodeInput', {
  fields: (t) => ({
    code: t.string(),
    amount: t.string({ description: 'What it took off the order, a decimal string in the order\'s currency.' }),
  }),
});

const OrderInput = builder.inputType('OrderInput', {
  description: 'The order\'s full state, as PUT /rest-api/v1/orders/{orderId} takes it. Money as decimal strings in `currency`.',
  fields: (t) => ({
    customerIdentifier: t.string({ description: 'Shop customer id or e-mail.' }),
    currency: t.string({ description: 'ISO 4217.' }),
    subtotal: t.string({ description: 'Line items after discounts.' }),
    shipping: t.string({ required: false }),
    tax: t.string({ required: false }),
    total: t.string(),
    refunded: t.string({ required: false }),
    status: t.field({ type: OrderStatus }),
    test: t.boolean({ required: false, description: 'A test order (Shopify\'s test); default false. It earns nothing unless the shop\'s earnOnTestOrders is on.' }),
    lineItems: t.field({ type: [OrderLineInput] }),
    discountCodes: t.field({
      type: [OrderDiscountCodeInput],
      required: false,
      description: `The codes the order used (at most ${MAX_ORDER_DISCOUNT_CODES}). Each issued code of the shop among them becomes used by this order when the order is first recorded with it or a later state adds it; left out, the order keeps the ones it has.`,
    }),
    processedAt: t.field({ type: 'DateTime', required: false }),
    sourceUpdatedAt: t.field({ type: 'DateTime', required: false, description: 'The source\'s last change (Shopify updated_at): an older state than the stored one changes nothing.' }),
  }),
});

const OrderUpsertPayload = builder
  .objectRef<{ order?: OrderShape; created?: boolean; changed?: boolean; userErrors: UserErrorShape[] }>('OrderUpsertPayload')
  .implement({
    fields: (t) => ({
      order: t.field({ type: Order, nullable: true, resolve: (p) => p.order ?? null }),
      created: t.boolean({ nullable: true, resolve: (p) => p.created ?? null }),
      changed: t.boolean({ nullable: true, description: 'False when the state was the one already recorded (or older).', resolve: (p) => p.changed ?? null }),
      userErrors: t.field({ type: [UserError], resolve: (p) => p.userErrors }),
    }),
  });

/** GraphQL's DateTime arrives as a Date; the domain parses ISO strings as REST sends them. */
const isoOrAbsent = (value: Date | null | undefined) => (value instanceof Date ? value.toISOString() : value);

builder.queryFields((t) => ({
  order: t.field({
    type: Order,
    nullable: true,
    description: 'The order with this (shop\'s own) order id; null when there is none.',
    args: { orderId: t.arg.string({ required: true }) },
    resolve: async (_root, { orderId }, ctx) => getOrder(ctx.db, ctx.shop.id, orderId).catch((err: { code?: string }) => (err.code === 'order_not_found' ? null : Promise.reject(err))),
  }),
}));

builder.mutationFields((t) => ({
  orderUpsert: t.field({
    type: OrderUpsertPayload,
    description: 'Records the order\'s full state; points follow (see Order). The same state again changes nothing.',
    args: { orderId: t.arg.string({ required: true }), input: t.arg({ type: OrderInput, required: true }) },
    resolve: (_root, { orderId, input }, ctx) =>
      withUserErrors(() => upsertOrder(ctx.db, ctx.shop.id, orderId, { ...input, processedAt: isoOrAbsent(input.processedAt), sourceUpdatedAt: isoOrAbsent(input.sourceUpdatedAt) })),
  }),
}));
