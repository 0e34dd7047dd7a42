// Insights: the ledger's movements over time (points issued, redeemed, expired; active members),
// read from buckets that each ledger statement keeps, by day in the zone the shop had then.

export {
  type CodeCounts, compactInsights, INSIGHT_INTERVALS, type PointsInsight, type PointsInsights, pointsInsights,
  purgeActiveMemberMarkers, type RewardInsight, type RewardInterval, startTimezonePeriod, type TierCount,
} from './insights.js';
