import {
  type CodeCounts as CodeCountsShape, INSIGHT_INTERVALS, type PointsInsight as PointsInsightShape, pointsInsights, type PointsInsights as PointsInsightsShape,
  type RewardInsight as RewardInsightShape, type RewardInterval as RewardIntervalShape, type TierCount as TierCountShape,
} from '../domain/insights/index.js';
import { builder } from './builder.js';
import { Shop } from './shop.js';

const InsightInterval = builder.enumType('InsightInterval', { values: INSIGHT_INTERVALS });

const PointsIssued = builder.objectRef<PointsInsightShape['issued']>('PointsIssued').implement({
  description: 'Points given in an interval, by where they came from.',
  fields: (t) => ({
    orders: t.expose('orders', { type: 'BigCount', description: 'Earned by orders (place_order rules), when they became available.' }),
    rules: t.expose('rules', { type: 'BigCount', description: 'Earned by the other rules: sign-up, birthday, custom actions.' }),
    manual: t.expose('manual', { type: 'BigCount', description: 'Added over the API (points/add, a higher set) and by imports.' }),
    referrals: t.expose('referrals', { type: 'BigCount', description: 'Referral rewards, to referrers and referees.' }),
    total: t.expose('total', { type: 'BigCount' }),
  }),
});

const USE_RATE = 'Codes used ÷ codes issued in the same span, rounded half up to 4 decimals from the two exact counts; null when none was issued. Above 1 when codes issued earlier were used in it.';

/** The ends of codes: on the per-interval totals, a reward's range and a reward's intervals. */
const CodeEnds = builder.interfaceRef<Omit<CodeCountsShape, 'issued'>>('CodeEnds').implement({
  description: 'Discount codes whose life ended in a span, each counted at the instant of its end, and the use rate.',
  fields: (t) => ({
    used: t.expose('used', { type: 'BigCount', description: 'Codes used by an order in the span (at the order\'s time).' }),
    expired: t.expose('expired', { type: 'BigCount', description: 'Codes that expired in the span (at their expiresAt).' }),
    cancelled: t.expose('cancelled', { type: 'BigCount', description: 'Codes the shop cancelled in the span.' }),
    useRate: t.exposeFloat('useRate', { nullable: true, description: USE_RATE }),
  }),
});

const CodeCounts = builder.objectRef<CodeCountsShape>('CodeCounts').implement({
  description: 'Discount codes issued in an interval, and those whose life ended in it, each counted at the instant of its end.',
  interfaces: [CodeEnds],
  fields: (t) => ({ issued: t.expose('issued', { type: 'BigCount', description: 'Codes issued (redemptions).' }) }),
});

const RewardInterval = builder.objectRef<RewardIntervalShape>('RewardInterval').implement({
  description: 'One reward\'s discount codes in one local hour or day of the shop, starting at `at` (the `points` entry of the same `at`).',
  interfaces: [CodeEnds],
  fields: (t) => ({
    at: t.expose('at', { type: 'DateTime' }),
    date: t.exposeString('date', { description: 'The local date the interval starts on (YYYY-MM-DD), as in `points`.' }),
    issued: t.expose('issued', { type: 'BigCount', description: 'Codes issued (redemptions).' }),
  }),
});

const PointsInsight = builder.objectRef<PointsInsightShape>('PointsInsight').implement({
  description: 'The ledger over one local hour or day of the shop, starting at `at`.',
  fields: (t) => ({
    at: t.expose('at', { type: 'DateTime', description: 'The interval\'s start, the shop\'s local midnight (or hour) as an instant.' }),
    date: t.exposeString('date', {
      description: 'The local date the interval starts on (YYYY-MM-DD). A day before a change of time zone is a day of the zone the shop had then: label days with this, not with `at` read in `timezone`.',
    }),
    issued: t.field({ type: PointsIssued, resolve: (p) => p.issued }),
    removedManually: t.expose('removedManually', { type: 'BigCount', description: 'Taken by points/substract, lower sets and imports.' }),
    redeemed: t.expose('redeemed', { type: 'BigCount', description: 'Spent on discount codes.' }),
    expired: t.expose('expired', { type: 'BigCount' }),
    clawedBack: t.expose('clawedBack', { type: 'BigCount', description: 'Taken back by refunds and cancellations.' }),
    outstanding: t.expose('outstanding', { type: 'BigCount', description: 'Points in customers\' balances at the interval\'s end: the program\'s liability.' }),
    pending: t.expose('pending', { type: 'BigCount', description: 'Points held as pending at the interval\'s end (orders\' points waiting for pendingDays).' }),
    activeMembers: t.expose('activeMembers', {
      type: 'BigCount',
      nullable: true,
      description:
        'Customers with a ledger entry other than an expiry, or an order\'s pending points, on this local day. Days only: null in an hourly series.',
    }),
    newMembers: t.expose('newMembers', { type: 'BigCount', description: 'Customers who joined in the interval.' }),
    members: t.expose('members', { type: 'BigCount', description: 'All customers at the interval\'s end.' }),
    codes: t.field({ type: CodeCounts, description: 'Discount codes of every reward issued and ended in the interval. Asked for, it costs a pass over every reward\'s rollups (as `rewards { intervals }`, read once for both).', resolve: (p) => p.codes() }),
  }),
});

const RewardInsight = builder.objectRef<RewardInsightShape>('RewardInsight').implement({
  description: 'Redemptions of one reward in the range: codes issued, how many ended and how, and the same per interval.',
  interfaces: [CodeEnds],
  fields: (t) => ({
    rewardId: t.exposeID('rewardId'),
    name: t.exposeString('name', { nullable: true, description: 'Null when the reward was deleted since.' }),
    type: t.exposeString('type', { nullable: true }),
    codes: t.expose('codes', { type: 'BigCount', description: 'Discount codes issued.' }),
    points: t.expose('points', { type: 'BigCount', description: 'Points spent on them.' }),
    discount: t.exposeString('discount', { description: 'Their discounts added up, a decimal in the reward\'s unit (money in the shop\'s currency, percent, or shipping).' }),
    intervals: t.field({
      type: [RewardInterval],
      description: 'The intervals of the series in which the reward had codes issued or ended, in order; the others had none. Read only when asked (for every reward at once): a few times the cost of the range\'s figures.',
      resolve: (r) => r.intervals(),
    }),
  }),
});

const TierCount = builder.objectRef<TierCountShape>('TierCount').implement({
  fields: (t) => ({
    tierId: t.exposeID('tierId'),
    name: t.exposeString('name'),
    members: t.expose('members', { type: 'BigCount', description: 'Customers holding the tier now.' }),
  }),
});

const ShopInsights = builder.objectRef<PointsInsightsShape>('ShopInsights').implement({
  fields: (t) => ({
    interval: t.field({ type: InsightInterval, resolve: (i) => i.interval }),
    timezone: t.exposeString('timezone', {
      description: 'The shop\'s time zone now, whose hours and days the intervals are; days before a change of time zone are those of the zone the shop had then (see `date`).',
    }),
    points: t.field({ type: [PointsInsight], resolve: (i) => i.points }),
    rewards: t.field({ type: [RewardInsight], description: 'Redemptions by reward over the series\' range, most redeemed first.', resolve: (i) => i.rewards }),
    tiers: t.field({ type: [TierCount], description: 'Members per VIP tier now, lowest first.', resolve: (i) => i.tiers }),
  }),
});

builder.objectFields(Shop, (t) => ({
  insights: t.field({
    type: ShopInsights,
    description:
      'The program over time: every local hour or day (the shop\'s time zone; a day before a change of zone is a day of the zone it had then) starting in [from, to), the first rounded down to its start; ' +
      'at most 366 days or 744 hours. Read from rollups the ledger writes keep, never by scanning the ledger.',
    args: {
      from: t.arg({ type: 'DateTime', required: true }),
      to: t.arg({ type: 'DateTime', required: true }),
      interval: t.arg({ type: InsightInterval, required: false, defaultValue: 'day' }),
    },
    resolve: (shop, args, ctx) => pointsInsights(ctx.db, shop.id, { from: args.from, to: args.to, interval: args.interval ?? 'day' }),
  }),
}));
