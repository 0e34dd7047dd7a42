import type { Customer as CustomerShape } from '../domain/customers/index.js';
import { getOrCreateReferralCode, getReferralSettings, listRefereesOfReferrers, type Referee as RefereeShape, referralCodesOf, type ReferralSettings as ReferralSettingsShape, registerReferral, updateReferralSettings } from '../domain/rewards/index.js';
import { actorOf, BATCH_ONLY, builder, STOREFRONT } from './builder.js';
import { connectionsOf, PAGE_ARGS } from './connections.js';
import { Customer, CustomerInput } from './customer.js';
import { UserError, type UserErrorShape, withUserErrors } from './user-errors.js';

/** The contract's referee record, field for field. */
export const Referee = builder.objectRef<RefereeShape>('Referee').implement({
  description: 'A customer who signed up with a referrer\'s code.',
  fields: (t) => ({
    id: t.exposeID('id', { description: 'The referral record id.' }),
    status: t.exposeBoolean('status'),
    referralCode: t.exposeString('referralCode', { description: 'The code the referee signed up with.' }),
    birthday: t.exposeString('birthday', { nullable: true, description: 'YYYY-MM-DD' }),
    shopifyCustomerId: t.exposeString('shopifyCustomerId'),
    points: t.exposeInt('points'),
    email: t.exposeString('email'),
    latestActivity: t.expose('latestActivity', {
      type: 'DateTime',
      description: 'The referee\'s newest ledger entry, or when it became a customer.',
    }),
    createdAt: t.expose('createdAt', { type: 'DateTime', description: 'When the referral was recorded.' }),
    updatedAt: t.expose('updatedAt', { type: 'DateTime' }),
  }),
});

const ReferralSettings = builder.objectRef<ReferralSettingsShape>('ReferralSettings').implement({
  description: 'Points granted, as referral_reward ledger entries, when a referee signs up. 0 grants nothing.',
  fields: (t) => ({
    referrerPoints: t.exposeInt('referrerPoints'),
    refereePoints: t.exposeInt('refereePoints'),
  }),
});

const RefereeConnection = builder.connectionObject({ type: Referee, name: 'RefereeConnection' }, { name: 'RefereeEdge' });

builder.objectFields(Customer, (t) => ({
  referralCode: t.loadable({
    type: 'String',
    nullable: true,
    description: 'The customer\'s referral code; null until one is created (referralCodeCreate, or GET /referral).',
    loaderOptions: BATCH_ONLY,
    load: (customerIds: string[], ctx) => referralCodesOf(ctx.db, ctx.shop.id, customerIds),
    resolve: (customer) => customer._id,
  }),
  // Other customers' data: never on the storefront.
  referees: t.loadable({
    subGraphs: ['admin'],
    type: RefereeConnection,
    description: 'Customers who signed up with this customer\'s code, in sign-up order.',
    args: PAGE_ARGS,
    byPath: true,
    loaderOptions: BATCH_ONLY,
    load: (customerIds: string[], ctx, args) => connectionsOf(args, (page) => listRefereesOfReferrers(ctx.db, ctx.shop.id, customerIds, page)),
    resolve: (customer) => customer._id,
  }),
}));

builder.queryFields((t) => ({
  shopReferralSettings: t.field({
    type: ReferralSettings,
    resolve: (_root, _args, ctx) => getReferralSettings(ctx.db, ctx.shop.id),
  }),
}));

const ReferralRegisterInput = builder.inputType('ReferralRegisterInput', {
  fields: (t) => ({
    referralCode: t.string({ description: 'The referrer\'s code (any letter case).' }),
    customer: t.field({ type: CustomerInput, description: 'The referee: created, or updated if the shopifyCustomerId exists.' }),
  }),
});

const ReferralRegisterPayload = builder
  .objectRef<{ referee?: RefereeShape; customer?: CustomerShape; referrer?: CustomerShape; userErrors: UserErrorShape[] }>(
    'ReferralRegisterPayload',
  )
  .implement({
    fields: (t) => ({
      referee: t.field({ type: Referee, nullable: true, resolve: (p) => p.referee ?? null }),
      customer: t.field({ type: Customer, nullable: true, description: 'The referee as a customer.', resolve: (p) => p.customer ?? null }),
      referrer: t.field({ type: Customer, nullable: true, resolve: (p) => p.referrer ?? null }),
      userErrors: t.field({ type: [UserError], resolve: (p) => p.userErrors }),
    }),
  });

const ReferralCodeCreateInput = builder.inputType('ReferralCodeCreateInput', {
  fields: (t) => ({ customerIdentifier: t.string({ description: 'Shop customer id or e-mail.' }) }),
});

export const ReferralCodeCreatePayload = builder
  .objectRef<{ referralCode?: string; customer?: CustomerShape; userErrors: UserErrorShape[] }>('ReferralCodeCreatePayload')
  .implement({
  subGraphs: STOREFRONT,
    fields: (t) => ({
      referralCode: t.string({ nullable: true, resolve: (p) => p.referralCode ?? null }),
      customer: t.field({ type: Customer, nullable: true, resolve: (p) => p.customer ?? null }),
      userErrors: t.field({ type: [UserError], resolve: (p) => p.userErrors }),
    }),
  });

const ShopReferralSettingsInput = builder.inputType('ShopReferralSettingsInput', {
  fields: (t) => ({
    referrerPoints: t.int({ required: false, description: 'Points for the referrer per referee; omitted keeps the current value.' }),
    refereePoints: t.int({ required: false, description: 'Points for the referee on sign-up; omitted keeps the current value.' }),
  }),
});

const ShopReferralSettingsUpdatePayload = builder
  .objectRef<{ referralSettings?: ReferralSettingsShape; userErrors: UserErrorShape[] }>('ShopReferralSettingsUpdatePayload')
  .implement({
    fields: (t) => ({
      referralSettings: t.field({ type: ReferralSettings, nullable: true, resolve: (p) => p.referralSettings ?? null }),
      userErrors: t.field({ type: [UserError], resolve: (p) => p.userErrors }),
    }),
  });

builder.mutationFields((t) => ({
  referralCodeCreate: t.field({
    type: ReferralCodeCreatePayload,
    description:
      'Gives the customer a referral code (a referrals/code_created event), like the first GET /referral; ' +
      'returns the existing code, changing nothing, when the customer has one.',
    args: { input: t.arg({ type: ReferralCodeCreateInput, required: true }) },
    resolve: (_root, { input }, ctx) => withUserErrors(() => getOrCreateReferralCode(ctx.db, ctx.shop.id, input, actorOf(ctx))),
  }),
  referralRegister: t.field({
    type: ReferralRegisterPayload,
    description:
      'Signs a customer up with a referral code: creates (or links) the referee and grants the shop\'s referral rewards. ' +
      'Registering again with the same referrer changes nothing; self-referral and a second referrer are refused.',
    args: { input: t.arg({ type: ReferralRegisterInput, required: true }) },
    resolve: (_root, { input }, ctx) => withUserErrors(() => registerReferral(ctx.db, ctx.shop.id, input, actorOf(ctx))),
  }),
  shopReferralSettingsUpdate: t.field({
    type: ShopReferralSettingsUpdatePayload,
    description: 'Sets the points granted to referrer and referee when a referee signs up.',
    args: { input: t.arg({ type: ShopReferralSettingsInput, required: true }) },
    resolve: (_root, { input }, ctx) => withUserErrors(() => updateReferralSettings(ctx.db, ctx.shop.id, input, actorOf(ctx))),
  }),
}));
