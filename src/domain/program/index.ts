// The program: what earns points besides orders (earning rules, sign-up, custom actions, birthdays),
// tiers, and points expiry, with the daily runs that keep them.

export { birthdayRun } from './birthday-run.js';
export {
  ACTION_LIMITS, createEarningRule, deleteEarningRule, EARNING_RULE_TYPES, type EarningRule, listEarningRules,
  updateEarningRule,
} from './earning-rules.js';
export {
  EXPIRY_DAYS_MAX, EXPIRY_MODES, type ExpirySettings, expiryWarnings, nextExpiries, type NextExpiry, pointExpiry,
  switchExpiryMode,
} from './expiry.js';
export {
  type ActionAward, actionInputSchema, activeEligibilityOf, earningRuleEligibility, reportAction, type RuleEligibility,
  signUpBonusSince,
} from './rule-awards.js';
export { upsertCustomer, upsertCustomerIn } from './sign-up.js';
export {
  clearTierOverride, overrideTier, placeTiers, shareTiersByName, tierOverrideEnd, type TierOverrideResult,
} from './tier-overrides.js';
export {
  changeTierSettings, createTier, type CustomerTier, customerTiers, customerTierStatus, customerWithStanding, deleteTier, listTiers,
  type Tier, TIER_METRICS, TIER_WINDOWS, tierEvaluation, type TierOverride, tierOverrides, type TierProgress,
  type TierSettings, type TierStanding, tierStandings, tierSettingsSchema, updateTier,
} from './tiers.js';
