import { createContextCache } from '@pothos/core';
import DataLoader from 'dataloader';
import type { Customer as CustomerShape } from '../domain/customers/index.js';
import {
  clearTierOverride, createTier, type CustomerTier as CustomerTierShape, customerWithStanding, deleteTier, listTiers, overrideTier, type Tier as TierShape, TIER_METRICS, TIER_WINDOWS,
  type TierOverride as TierOverrideShape, type TierOverrideResult, tierOverrides, type TierProgress as TierProgressShape, type TierSettings as TierSettingsShape,
  type TierStanding, tierStandings, updateTier,
} from '../domain/program/index.js';
import { actorOf, BATCH_ONLY, builder, type GraphQLContext, STOREFRONT } from './builder.js';
import { Customer, type CustomerNode } from './customer.js';
import { deletePayload, UserError, type UserErrorShape, withUserErrors } from './user-errors.js';

const TierMetric = builder.enumType('TierMetric', {
  subGraphs: STOREFRONT,
  values: {
    points_earned: { description: 'Points credited by rules and adds (orders, sign-ups, birthdays, actions, referrals, points/add), net of clawbacks.' },
    amount_spent: { description: 'Money paid in orders in the shop\'s currency, net of refunds, counted on the order\'s day.' },
  } as const satisfies Record<(typeof TIER_METRICS)[number], unknown>,
});

const TierWindow = builder.enumType('TierWindow', {
  values: {
    lifetime: { description: 'Everything since the customer\'s first points or order.' },
    calendar_year: { description: 'The shop-local calendar year; qualifying in year Y keeps the tier through Y+1.' },
    rolling_days: { description: 'The last `days` shop-local days, today included.' },
  } as const satisfies Record<(typeof TIER_WINDOWS)[number], unknown>,
});

export const TierSettings = builder.objectRef<TierSettingsShape>('TierSettings').implement({
  description: 'What VIP tiers count. A tier rises at once; it falls only at the daily evaluation, when the shop\'s day begins. See docs/tiers.md.',
  fields: (t) => ({
    metric: t.field({ type: TierMetric, resolve: (s) => s.metric }),
    window: t.field({ type: TierWindow, resolve: (s) => s.window }),
    days: t.exposeInt('days', { description: 'rolling_days: the window\'s length, 1 to 1096 (default 365).' }),
  }),
});

export const TierSettingsInput = builder.inputType('TierSettingsInput', {
  description: 'Omitted fields keep their value. The metric is fixed while the shop has tiers; a new window re-evaluates every member at once.',
  fields: (t) => ({
    metric: t.field({ type: TierMetric, required: false }),
    window: t.field({ type: TierWindow, required: false }),
    days: t.int({ required: false, description: '1 to 1096.' }),
  }),
});

const Tier = builder.objectRef<TierShape>('Tier').implement({
  subGraphs: STOREFRONT,
  description: 'A VIP tier: customers whose metric reaches its threshold hold it, and earn `multiplier` × the points of place_order rules.',
  fields: (t) => ({
    id: t.exposeID('id'),
    name: t.exposeString('name'),
    threshold: t.exposeString('threshold', { description: 'points_earned: whole points ("500"); amount_spent: money in the shop\'s currency ("250.00").' }),
    multiplier: t.exposeString('multiplier', { description: 'A decimal from "1" to "100": place_order points × it, floored once.' }),
    createdAt: t.expose('createdAt', { type: 'DateTime' }),
    updatedAt: t.expose('updatedAt', { type: 'DateTime' }),
  }),
});

const TierProgress = builder.objectRef<TierProgressShape>('TierProgress').implement({
  subGraphs: STOREFRONT,
  description: 'Where the customer stands on the ladder, read live.',
  fields: (t) => ({
    current: t.exposeString('current', { description: 'The metric over the window now (calendar_year: this year\'s), in the threshold\'s unit.' }),
    next: t.field({ type: Tier, nullable: true, description: 'The next tier above the one held; null at the top.', resolve: (p) => p.next }),
    remaining: t.exposeString('remaining', { nullable: true, description: 'What it takes to reach `next`.' }),
    metric: t.field({ type: TierMetric, description: 'What `current`, `remaining` and the thresholds count.', resolve: (p) => p.metric }),
    currency: t.exposeString('currency', {
      nullable: true,
      description: 'amount_spent: the shop\'s currency (ISO 4217) the amounts are in, to format them ("$215.03"); null for points_earned.',
    }),
  }),
});

const CustomerTier = builder.objectRef<CustomerTierShape>('CustomerTier').implement({
  subGraphs: STOREFRONT,
  fields: (t) => ({
    tier: t.field({ type: Tier, resolve: (c) => c.tier }),
    since: t.expose('since', { type: 'DateTime', description: 'When the customer reached it (or was moved to it by an evaluation).' }),
  }),
});

const TierOverride = builder.objectRef<TierOverrideShape>('TierOverride').implement({
  description: 'Staff\'s override of a customer\'s tier: they hold `tier` until `until`, whatever their metric; then the metric decides again. See docs/tiers.md "Overrides".',
  fields: (t) => ({
    tier: t.field({ type: Tier, nullable: true, description: 'The tier held while the override lasts; null: none.', resolve: (o) => o.tier }),
    until: t.expose('until', { type: 'DateTime', description: 'When it ends by itself.' }),
    reason: t.exposeString('reason', { nullable: true, description: 'Why, as staff wrote it: internal, never on the storefront.' }),
    createdAt: t.expose('createdAt', { type: 'DateTime', description: 'When it was set.' }),
  }),
});

/**
 * A customer's tier and progress come from one loader: both fields of every customer in a
 * response ask in the same batch, so together they cost one read.
 */
const standings = createContextCache(
  (ctx: GraphQLContext) => new DataLoader((customerIds: readonly string[]) => tierStandings(ctx.db, ctx.shop.id, customerIds), BATCH_ONLY),
);
const standingOf = (customer: CustomerNode, ctx: GraphQLContext) => customer.standing ?? standings(ctx).load(customer._id);

/**
 * Starts reading a customer's standing without waiting for anything else of theirs (the storefront's
 * `me` knows the id from the token), so the first view is one round. A parent that starts it must
 * have its fields asking for it: the rejection is left to them. Read now, not through the loader:
 * its batch would wait a tick, past an embedded database's answers.
 */
export function preloadStanding(ctx: GraphQLContext, customerId: string): Promise<TierStanding> {
  return leftToFields(tierStandings(ctx.db, ctx.shop.id, [customerId]).then(([one]) => one!));
}

/** preloadStanding with the customer's record and the shop's rewards_version, read in the standing's statement. */
export function preloadWithStanding(
  ctx: GraphQLContext,
  customerId: string,
): { customer: Promise<CustomerShape>; standing: Promise<TierStanding>; rewardsVersion: Promise<string> } {
  const read = customerWithStanding(ctx.db, ctx.shop.id, customerId);
  return { customer: read.then((r) => r.customer), standing: leftToFields(read.then((r) => r.standing)), rewardsVersion: leftToFields(read.then((r) => r.rewardsVersion)) };
}

/** A read whose failure its fields report (when they run): not an unhandled rejection meanwhile. */
function leftToFields<T>(read: Promise<T>): Promise<T> {
  read.catch(() => {});
  return read;
}

builder.objectFields(Customer, (t) => ({
  tierOverride: t.loadable({
    subGraphs: ['admin'],
    type: TierOverride,
    nullable: true,
    description: 'Staff\'s override of the customer\'s tier while it holds (`tier` then shows its tier); null: none.',
    loaderOptions: BATCH_ONLY,
    load: (customerIds: string[], ctx) => tierOverrides(ctx.db, ctx.shop.id, customerIds),
    resolve: (customer) => customer._id,
  }),
  tier: t.field({
    type: CustomerTier,
    nullable: true,
    description: 'The VIP tier the customer holds; null: none.',
    resolve: async (customer, _args, ctx) => (await standingOf(customer, ctx)).held,
  }),
  tierProgress: t.field({
    type: TierProgress,
    description: 'The metric now, the next tier and what it takes to reach it.',
    resolve: async (customer, _args, ctx) => (await standingOf(customer, ctx)).progress,
  }),
}));

const TierPayload = builder.objectRef<{ tier?: TierShape; userErrors: UserErrorShape[] }>('TierPayload').implement({
  fields: (t) => ({
    tier: t.field({ type: Tier, nullable: true, resolve: (p) => p.tier ?? null }),
    userErrors: t.field({ type: [UserError], resolve: (p) => p.userErrors }),
  }),
});

const tierFields = (t: Parameters<Parameters<typeof builder.inputType>[1]['fields']>[0], required: boolean) => ({
  name: t.string({ required, description: '1 to 64 characters, unique in the shop.' }),
  threshold: t.string({ required, description: 'points_earned: whole points ("500"); amount_spent: money ("250.00"). Unique in the shop.' }),
  multiplier: t.string({ required: false, description: '"1" (default) to "100", up to 4 decimals; a higher tier never multiplies less.' }),
});

const CustomerTierOverridePayload = builder.objectRef<Partial<TierOverrideResult> & { userErrors: UserErrorShape[] }>('CustomerTierOverridePayload').implement({
  fields: (t) => ({
    customer: t.field({ type: Customer, nullable: true, resolve: (p) => p.customer ?? null }),
    tierOverride: t.field({ type: TierOverride, nullable: true, description: 'The override now in force; null after a clear.', resolve: (p) => p.tierOverride ?? null }),
    userErrors: t.field({ type: [UserError], resolve: (p) => p.userErrors }),
  }),
});

const CustomerTierOverrideInput = builder.inputType('CustomerTierOverrideInput', {
  fields: (t) => ({
    customerIdentifier: t.string({ required: true, description: 'Shop customer id or e-mail.' }),
    tierId: t.id({ required: false, description: 'The tier to hold; must be given, null for no tier.' }),
    until: t.field({ type: 'DateTime', required: true, description: 'When the override ends by itself; in the future.' }),
    reason: t.string({ required: false, description: 'Why (internal), up to 500 characters.' }),
  }),
});

const CustomerTierOverrideClearInput = builder.inputType('CustomerTierOverrideClearInput', {
  fields: (t) => ({ customerIdentifier: t.string({ required: true, description: 'Shop customer id or e-mail.' }) }),
});

const TierCreateInput = builder.inputType('TierCreateInput', { fields: (t) => tierFields(t, true) });
const TierUpdateInput = builder.inputType('TierUpdateInput', {
  description: 'Omitted fields keep their value.',
  fields: (t) => ({ id: t.id({ required: true }), ...tierFields(t, false) }),
});

builder.queryFields((t) => ({
  tiers: t.field({
    type: [Tier],
    description: 'The shop\'s VIP tiers, lowest threshold first.',
    resolve: (_root, _args, ctx) => listTiers(ctx.db, ctx.shop.id),
  }),
}));

builder.mutationFields((t) => ({
  tierCreate: t.field({
    type: TierPayload,
    description: 'Adds a tier; the shop\'s first starts counting its metric, history included. Every member is evaluated again at once.',
    args: { input: t.arg({ type: TierCreateInput, required: true }) },
    resolve: (_root, { input }, ctx) => withUserErrors(() => createTier(ctx.db, ctx.shop.id, input, new Date(), actorOf(ctx))),
  }),
  tierUpdate: t.field({
    type: TierPayload,
    description: 'Changes a tier; every member is evaluated again at once. Orders already earned keep their multiplier.',
    args: { input: t.arg({ type: TierUpdateInput, required: true }) },
    resolve: (_root, { input }, ctx) => withUserErrors(() => updateTier(ctx.db, ctx.shop.id, input, new Date(), actorOf(ctx))),
  }),
  tierDelete: t.field({
    type: deletePayload('TierDeletePayload', 'deletedTierId'),
    description: 'Deletes a tier nobody holds (tier_in_use otherwise).',
    args: { id: t.arg.id({ required: true }) },
    resolve: (_root, { id }, ctx) => withUserErrors(() => deleteTier(ctx.db, ctx.shop.id, String(id), new Date(), actorOf(ctx))),
  }),
  customerTierOverride: t.field({
    type: CustomerTierOverridePayload,
    description: 'Holds the customer\'s tier at `tierId` (null: none) until `until`: no upgrade or evaluation moves it meanwhile, and orders earn by its multiplier. A new override replaces the one in force.',
    args: { input: t.arg({ type: CustomerTierOverrideInput, required: true }) },
    resolve: (_root, { input }, ctx) => withUserErrors(() => overrideTier(ctx.db, ctx.shop.id, input, new Date(), actorOf(ctx))),
  }),
  customerTierOverrideClear: t.field({
    type: CustomerTierOverridePayload,
    description: 'Ends the customer\'s override now: they take the tier their metric reaches (tier_override_not_found when none holds).',
    args: { input: t.arg({ type: CustomerTierOverrideClearInput, required: true }) },
    resolve: (_root, { input }, ctx) => withUserErrors(() => clearTierOverride(ctx.db, ctx.shop.id, input, new Date(), actorOf(ctx))),
  }),
}));
