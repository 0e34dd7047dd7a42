// The ledger: balances and the entries that change them, exactly once (group commit, idempotency
// keys), and points held as pending until they are released.

export {
  claimIdempotencyKey, completeIdempotencyKey, purgeExpiredIdempotencyKeys, releaseIdempotencyKey, type StoredResponse,
} from './idempotency.js';
export {
  type Hold, listPendingEarns, type PendingEarn, pendingEvent, takePendingPoints, writePendingPoints,
} from './pending-points.js';
export { pendingRelease } from './pending-release.js';
export {
  type Activity, ACTIVITY_TYPES, activityJson, applyBalanceChange, type BalanceChange, balanceChangeOf, changePoints,
  findActivity, listActivitiesOfCustomers, listShopActivities, MAX_AMOUNT, MAX_BALANCE, nextBalance,
  pointsChangeSchemas, type PointsOperation, writeBalanceChange, writeLockedBalanceChanges,
} from './points.js';
