// Insights: the ledger's movements over time (points issued, redeemed, expired; active members),
// read from buckets that each ledger statement keeps, by day in the zone the shop had then.

export {
  compactInsights, INSIGHT_INTERVALS, type PointsInsight, type PointsInsights, pointsInsights,
  purgeActiveMemberMarkers, type RewardInsight, startTimezonePeriod, type TierCount,
} from './insights.js';
