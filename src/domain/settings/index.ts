// Settings: a shop's settings in one place (currency, time zone, pending days, expiry, tiers,
// referral points, rate limit, retention); a change reaches the capabilities it concerns.

export {
  getShopSettings, type ShopSettings, shopSettingsGeneration, shopSettingsInputSchema, updateShopSettings,
} from './shop-settings.js';
