// Rewards: what points buy (redemptions and the discount codes they issue) and referrals, whose
// rewards are points too.

export {
  APPLY_PRODUCT_OPTIONS, createPointsRedemption, deletePointsRedemption, DISCOUNT_COMBINATIONS, EXCHANGE_TYPES,
  EXPIRE_DATE_TYPES, listPointsRedemptions, MINIMUM_REQUIREMENT_TYPES, pagePointsRedemptions, pointsRedeemSchema, storefrontRewards,
  type PointsRedemption, PURCHASE_TYPES, redeemOwnPoints, redeemPoints, updatePointsRedemption,
} from './redemptions.js';
export {
  getOrCreateReferralCode, getReferralCode, getReferralSettings, linkReferee, listRefereesOfReferrers, pageReferees,
  type Referee, referralCodeOf, referralCodesOf, type ReferralSettings, registerReferral, updateReferralSettings,
} from './referrals.js';
export {
  type Cart, type CartDiscount, type CartLine, CHECK_REASONS, type CheckReason, checkDiscountCode, type CodeTerms, discountCodeCheckSchema,
  type DiscountCodeCheck, discountForCart,
} from './code-check.js';
