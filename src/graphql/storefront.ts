import { createContextCache } from '@pothos/core';
import { pipe, Repeater } from 'graphql-yoga';
import type { DB } from '../db/database.js';
import { type Customer as CustomerShape, getCustomer, isTokenLive, toCustomer, type TokenHolder } from '../domain/customers/index.js';
import { activeEligibilityOf, type RuleEligibility, type TierStanding } from '../domain/program/index.js';
import { redeemOwnPoints, referralCodeOf, storefrontRewards } from '../domain/rewards/index.js';
import type { EventEnvelope } from '../events/outbox-relay.js';
import { builder, type GraphQLContext, tokenHolder } from './builder.js';
import { forwardPageArgs, PAGE_ARGS, toConnection } from './connections.js';
import { Customer } from './customer.js';
import { PointsRedeemPayload } from './discount-code.js';
import { EarningRule } from './earning-rule.js';
import { PointsRedemptionConnection } from './redemption.js';
import { ReferralCodeCreatePayload } from './referral.js';
import { selectsAny } from './selections.js';
import { preloadStanding, preloadWithStanding } from './tier.js';
import { withUserErrors } from './user-errors.js';

/**
 * The storefront's roots (/storefront/graphql, DESIGN.md "Storefront access"). None takes a
 * customer: each answers for the customer of the request's access token, through the same domain
 * calls as the admin fields. The types they return are the admin ones tagged STOREFRONT.
 */
const STOREFRONT_ONLY = { subGraphs: ['storefront' as const] };

const me = (ctx: GraphQLContext) => ({ id: tokenHolder(ctx).customerId });

type CustomerRead = { customer: Promise<CustomerShape>; standing?: Promise<TierStanding>; rewardsVersion?: Promise<string> };

/**
 * The token's customer for the root fields that ask for it (`me`, and the balance `rewards` judges
 * by): read afresh once per operation, started by the first of them (the token's identity is
 * cached, its customer's record never is), in the standing's statement when that one is `me` asking
 * for the tier. Only query fields use it; a subscription reads the customer at each event.
 */
const tokenCustomers = createContextCache((_ctx: GraphQLContext) => ({ read: undefined as CustomerRead | undefined }));
function tokenCustomer(ctx: GraphQLContext, withStanding = false): CustomerRead {
  const cached = tokenCustomers(ctx);
  cached.read ??= withStanding ? preloadWithStanding(ctx, me(ctx).id) : { customer: getCustomer(ctx.db, ctx.shop.id, me(ctx)).then(toCustomer) };
  return cached.read;
}

const EarningRuleEligibility = builder.objectRef<RuleEligibility>('EarningRuleEligibility').implement({
  subGraphs: ['storefront'],
  description: 'An active earning rule and whether the customer already earned it in its current period.',
  fields: (t) => ({
    rule: t.field({ type: EarningRule, resolve: (r) => r }),
    isEarned: t.exposeBoolean('isEarned', {
      description: 'sign_up: awarded; birthday: this year; custom: in its current period (ever, for once). place_order: always false.',
    }),
  }),
});

builder.queryFields((t) => ({
  me: t.field({
    ...STOREFRONT_ONLY,
    type: Customer,
    description: 'The customer of the access token.',
    // The token names the customer, so the record and the standing are read at once, beside the
    // rewards: one round for the first view.
    resolve: async (_root, _args, ctx, info) => {
      const tiered = selectsAny(info, ['tier', 'tierProgress']);
      const read = tokenCustomer(ctx, tiered);
      // `rewards` asked first started the record alone: the standing is read beside it.
      const standing = tiered ? (read.standing ?? preloadStanding(ctx, me(ctx).id)) : undefined;
      return { ...(await read.customer), standing };
    },
  }),
  rewards: t.field({
    ...STOREFRONT_ONLY,
    type: PointsRedemptionConnection,
    description: 'The shop\'s rewards by sortIndex, `redeemable` for this customer (active, affordable).',
    args: PAGE_ARGS,
    resolve: async (_root, args, ctx) =>
      toConnection(await storefrontRewards(ctx.db, ctx.shop.id, { ...forwardPageArgs(args), balance: tokenCustomer(ctx).customer.then((c) => c.points), version: tokenCustomer(ctx).rewardsVersion })),
  }),
  waysToEarn: t.field({
    ...STOREFRONT_ONLY,
    type: [EarningRuleEligibility],
    description: 'The shop\'s active earning rules, with whether this customer already earned each.',
    resolve: (_root, _args, ctx) => activeEligibilityOf(ctx.db, ctx.shop.id, me(ctx)),
  }),
}));

const RedeemInput = builder.inputType('RedeemInput', {
  subGraphs: ['storefront'],
  fields: (t) => ({
    rewardId: t.id({ description: 'The `_id` of one of `rewards`.' }),
    pointsAmount: t.int({ description: 'The reward\'s cost, or a multiple of it for variable rewards.' }),
    variantId: t.string({ required: false, description: 'Required for, and only used by, free_product rewards.' }),
    currencyActive: t.string({ required: false, description: 'ISO 4217 code stored on the discount code.' }),
  }),
});

builder.mutationFields((t) => ({
  redeem: t.field({
    ...STOREFRONT_ONLY,
    type: PointsRedeemPayload,
    description: 'Spends this customer\'s points on a discount code (pointsRedeem for the token\'s customer). Send an Idempotency-Key to retry safely.',
    args: { input: t.arg({ type: RedeemInput, required: true }) },
    resolve: (_root, { input }, ctx) => withUserErrors(() => redeemOwnPoints(ctx.db, ctx.shop.id, tokenHolder(ctx).customerId, input)),
  }),
  referralCode: t.field({
    ...STOREFRONT_ONLY,
    type: ReferralCodeCreatePayload,
    description: 'This customer\'s referral code, created on first ask (a referrals/code_created event).',
    resolve: (_root, _args, ctx) =>
      withUserErrors(() => referralCodeOf(ctx.db, ctx.shop.id, me(ctx))),
  }),
}));

/** Whether a committed event is about this customer (their ledger, orders, redemptions, tier, record). */
function concerns(event: EventEnvelope, customerId: string): boolean {
  const data = event.data as { customer?: unknown; _id?: unknown } | null;
  return data?.customer === customerId || (event.type.startsWith('customers/') && data?._id === customerId);
}

/**
 * The customer read afresh after each of their events, for as long as the token lives: the stream
 * ends when it expires and, at the next event, once it was revoked or the customer deleted.
 */
function whileTokenLives(db: DB, shopId: string, holder: TokenHolder) {
  return (source: AsyncIterable<EventEnvelope>) =>
    new Repeater<CustomerShape>(async (push, stop) => {
      const events = source[Symbol.asyncIterator]();
      const expiry = setTimeout(stop, holder.expiresAt.getTime() - Date.now());
      void stop.then(() => {
        clearTimeout(expiry);
        void events.return?.();
      });
      for (let next = await events.next(); !next.done; next = await events.next()) {
        if (!(await isTokenLive(db, holder))) break;
        const row = await getCustomer(db, shopId, { id: holder.customerId });
        await push(toCustomer(row));
      }
      stop();
    });
}

builder.subscriptionFields((t) => ({
  meChanged: t.field({
    ...STOREFRONT_ONLY,
    type: Customer,
    description: 'This customer after each change of theirs (points, orders, redemptions, tier), as it commits.',
    subscribe: async (_root, _args, ctx) => {
      const holder = tokenHolder(ctx);
      // Counted against the storefront's limits (per customer, per shop), not the shop's own; ended with the token.
      const owner = { shopId: ctx.shop.id, apiKeyId: `token:${holder.tokenId}`, customerId: holder.customerId };
      const events = await ctx.bus.subscribe(owner, (event) => concerns(event, holder.customerId));
      return pipe(events, whileTokenLives(ctx.db, ctx.shop.id, holder));
    },
    resolve: (customer) => customer,
  }),
}));
