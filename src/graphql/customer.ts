import { type Customer as CustomerShape, customersByIds, findCustomer, listCustomers, toCustomer } from '../domain/customers/index.js';
import { listActivitiesOfCustomers, listShopActivities } from '../domain/ledger/index.js';
import { type TierStanding, upsertCustomer } from '../domain/program/index.js';
import { Activity } from './activity.js';
import { actorOf, BATCH_ONLY, builder, STOREFRONT } from './builder.js';
import { connectionsOf, forwardPageArgs, PAGE_ARGS, toConnection } from './connections.js';
import { UserError, type UserErrorShape, withUserErrors } from './user-errors.js';

const ActivityConnection = builder.connectionObject({ type: Activity, name: 'ActivityConnection', subGraphs: STOREFRONT }, { name: 'ActivityEdge', subGraphs: STOREFRONT });

/** A customer as its fields see it: a parent that knows the tier reads are wanted may have started them (tier.ts). */
export type CustomerNode = CustomerShape & { standing?: Promise<TierStanding> };

export const Customer = builder.objectRef<CustomerNode>('Customer').implement({
  subGraphs: STOREFRONT,
  description: 'A customer of the shop, identified by its shop customer id or its e-mail.',
  fields: (t) => ({
    _id: t.exposeID('_id'),
    shopifyCustomerId: t.exposeString('shopifyCustomerId'),
    email: t.exposeString('email'),
    birthday: t.exposeString('birthday', { nullable: true, description: 'YYYY-MM-DD' }),
    points: t.exposeInt('points', { description: 'The balance; always the newPoints of the latest activity.' }),
    createdAt: t.expose('createdAt', { type: 'DateTime' }),
    updatedAt: t.expose('updatedAt', { type: 'DateTime' }),
    activities: t.loadable({
      type: ActivityConnection,
      description: 'The points ledger, newest first.',
      args: PAGE_ARGS,
      byPath: true,
      loaderOptions: BATCH_ONLY,
      load: (customerIds: string[], ctx, args) => connectionsOf(args, (page) => listActivitiesOfCustomers(ctx.db, ctx.shop.id, customerIds, page)),
      resolve: (customer) => customer._id,
    }),
  }),
});

// An entry of the shop-wide ledger names its customer for people (e-mail, shop id): admin only.
builder.objectFields(Activity, (t) => ({
  holder: t.loadable({
    subGraphs: ['admin'],
    type: Customer,
    nullable: true,
    description: 'The customer whose balance the entry changed; null once the customer is deleted.',
    loaderOptions: BATCH_ONLY,
    load: (customerIds: string[], ctx) => customersByIds(ctx.db, ctx.shop.id, customerIds),
    resolve: (activity) => activity.customer,
  }),
}));

builder.queryFields((t) => ({
  activities: t.field({
    type: ActivityConnection,
    description: 'The shop\'s points ledger, every customer\'s, newest first.',
    args: PAGE_ARGS,
    resolve: async (_root, args, ctx) => toConnection(await listShopActivities(ctx.db, ctx.shop.id, forwardPageArgs(args))),
  }),
  customer: t.field({
    type: Customer,
    nullable: true,
    description: 'The customer with this shop customer id or e-mail; null when the shop has none.',
    args: { identifier: t.arg.string({ required: true }) },
    resolve: async (_root, { identifier }, ctx) => {
      const row = await findCustomer(ctx.db, ctx.shop.id, identifier.trim());
      return row ? toCustomer(row) : null;
    },
  }),
  customers: t.field({
    type: builder.connectionObject({ type: Customer, name: 'CustomerConnection' }, { name: 'CustomerEdge' }),
    description: 'Customers ordered by lower-cased e-mail, in byte (code point) order.',
    args: { ...PAGE_ARGS, emailPrefix: t.arg.string({ required: false, description: 'Only e-mails starting with this (case-insensitive).' }) },
    resolve: async (_root, args, ctx) =>
      toConnection(await listCustomers(ctx.db, ctx.shop.id, { ...forwardPageArgs(args), emailPrefix: args.emailPrefix })),
  }),
}));

export const CustomerInput = builder.inputType('CustomerInput', {
  fields: (t) => ({
    shopifyCustomerId: t.string(),
    email: t.string(),
    birthday: t.string({ required: false, description: 'YYYY-MM-DD' }),
  }),
});

const CustomerUpsertPayload = builder
  .objectRef<{ customer?: CustomerShape; created?: boolean; userErrors: UserErrorShape[] }>('CustomerUpsertPayload')
  .implement({
    fields: (t) => ({
      customer: t.field({ type: Customer, nullable: true, resolve: (p) => p.customer ?? null }),
      created: t.boolean({ nullable: true, resolve: (p) => p.created ?? null }),
      userErrors: t.field({ type: [UserError], resolve: (p) => p.userErrors }),
    }),
  });

builder.mutationFields((t) => ({
  customerUpsert: t.field({
    type: CustomerUpsertPayload,
    description: 'Creates a customer, or updates the e-mail and birthday of the one with that shopifyCustomerId.',
    args: { input: t.arg({ type: CustomerInput, required: true }) },
    resolve: (_root, { input }, ctx) => withUserErrors(() => upsertCustomer(ctx.db, ctx.shop.id, input, actorOf(ctx))),
  }),
}));
