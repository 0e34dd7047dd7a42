// Every migration, in order. Listed statically (not read from the folder at run time) so the same
// code loads them under tsx, vitest and any bundler.
import type { Migration } from 'kysely';
import * as initial from './2026_11_22_001_initial.js';
import * as redemptionsReferrals from './2026_11_22_002_redemptions_referrals.js';
import * as webhooks from './2026_11_22_003_webhooks.js';
import * as outboxRelay from './2026_11_22_004_outbox_relay.js';
import * as webhookDelivery from './2026_11_22_005_webhook_delivery.js';
import * as shopSettings from './2026_11_22_006_shop_settings.js';
import * as webhookFairnessHealth from './2026_11_23_001_webhook_fairness_health.js';
import * as listsThatScale from './2026_11_24_001_lists_that_scale.js';
import * as purgeIndexes from './2026_11_24_002_purge_indexes.js';
import * as deliveryTopicGroup from './2026_11_24_003_delivery_topic_group.js';
import * as loyaltyEngine from './2026_11_24_004_loyalty_engine.js';
import * as shopifyConnector from './2026_11_24_005_shopify_connector.js';
import * as programVersion from './2026_11_24_006_program_version.js';
import * as shopDayRuns from './2026_11_24_007_shop_day_runs.js';
import * as pointExpiry from './2026_11_24_008_point_expiry.js';
import * as customerAccessTokens from './2026_11_24_010_customer_access_tokens.js';
import * as vipTiers from './2026_11_24_011_vip_tiers.js';
import * as storefrontOrigins from './2026_11_25_012_storefront_origins.js';
import * as insightBuckets from './2026_11_25_013_insight_buckets.js';
import * as programPage from './2026_11_25_014_program_page.js';
import * as dueWorkFailures from './2026_11_27_015_due_work_failures.js';
import * as shopifyPayloads from './2026_11_27_016_shopify_payloads.js';
import * as tierMetricRefunds from './2026_11_27_017_tier_metric_refunds.js';
import * as activeMembersZones from './2026_11_27_018_active_members_zones.js';
import * as knownTimeZones from './2026_11_27_019_known_time_zones.js';
import * as codeLifecycle from './2026_11_27_020_code_lifecycle.js';
import * as codeWarnings from './2026_11_27_021_code_warnings.js';
import * as shopifyAdmin from './2026_11_27_022_shopify_admin.js';
import * as shopifyCollections from './2026_11_27_023_shopify_collections.js';
import * as shopifyImports from './2026_11_27_024_shopify_imports.js';
import * as staff from './2026_11_27_025_staff.js';
import * as tierOverrides from './2026_11_27_026_tier_overrides.js';
import * as auditLog from './2026_11_27_027_audit_log.js';
import * as mail from './2026_11_27_028_mail.js';
import * as customerErasure from './2026_11_28_032_customer_erasure.js';
import * as shopDeletions from './2026_11_28_033_shop_deletions.js';
import * as complianceRequests from './2026_11_28_034_compliance_requests.js';
import * as mailTemplates from './2026_11_28_035_mail_templates.js';
import * as lotDrawByIndex from './2026_11_28_037_lot_draw_by_index.js';
import * as tierMetricTotals from './2026_11_28_038_tier_metric_totals.js';
import * as activeMembersImports from './2026_11_28_040_active_members_imports.js';
import * as insightDays from './2026_11_28_041_insight_days.js';
import * as rewardsVersion from './2026_11_28_042_rewards_version.js';
import * as tierUpgradeGenericPlans from './2026_11_28_043_tier_upgrade_generic_plans.js';
import * as insightDayStartPlpgsql from './2026_11_28_044_insight_day_start_plpgsql.js';

export const migrations: Record<string, Migration> = {
  '2026_11_22_001_initial': initial,
  '2026_11_22_002_redemptions_referrals': redemptionsReferrals,
  '2026_11_22_003_webhooks': webhooks,
  '2026_11_22_004_outbox_relay': outboxRelay,
  '2026_11_22_005_webhook_delivery': webhookDelivery,
  '2026_11_22_006_shop_settings': shopSettings,
  '2026_11_23_001_webhook_fairness_health': webhookFairnessHealth,
  '2026_11_24_001_lists_that_scale': listsThatScale,
  '2026_11_24_002_purge_indexes': purgeIndexes,
  '2026_11_24_003_delivery_topic_group': deliveryTopicGroup,
  '2026_11_24_004_loyalty_engine': loyaltyEngine,
  '2026_11_24_005_shopify_connector': shopifyConnector,
  '2026_11_24_006_program_version': programVersion,
  '2026_11_24_007_shop_day_runs': shopDayRuns,
  '2026_11_24_008_point_expiry': pointExpiry,
  '2026_11_24_010_customer_access_tokens': customerAccessTokens,
  '2026_11_24_011_vip_tiers': vipTiers,
  '2026_11_25_012_storefront_origins': storefrontOrigins,
  '2026_11_25_013_insight_buckets': insightBuckets,
  '2026_11_25_014_program_page': programPage,
  '2026_11_27_015_due_work_failures': dueWorkFailures,
  '2026_11_27_016_shopify_payloads': shopifyPayloads,
  '2026_11_27_017_tier_metric_refunds': tierMetricRefunds,
  '2026_11_27_018_active_members_zones': activeMembersZones,
  '2026_11_27_019_known_time_zones': knownTimeZones,
  '2026_11_27_020_code_lifecycle': codeLifecycle,
  '2026_11_27_021_code_warnings': codeWarnings,
  '2026_11_27_022_shopify_admin': shopifyAdmin,
  '2026_11_27_023_shopify_collections': shopifyCollections,
  '2026_11_27_024_shopify_imports': shopifyImports,
  '2026_11_27_025_staff': staff,
  '2026_11_27_026_tier_overrides': tierOverrides,
  '2026_11_27_027_audit_log': auditLog,
  '2026_11_27_028_mail': mail,
  '2026_11_28_032_customer_erasure': customerErasure,
  '2026_11_28_033_shop_deletions': shopDeletions,
  '2026_11_28_034_compliance_requests': complianceRequests,
  '2026_11_28_035_mail_templates': mailTemplates,
  '2026_11_28_037_lot_draw_by_index': lotDrawByIndex,
  '2026_11_28_038_tier_metric_totals': tierMetricTotals,
  '2026_11_28_040_active_members_imports': activeMembersImports,
  '2026_11_28_041_insight_days': insightDays,
  '2026_11_28_042_rewards_version': rewardsVersion,
  '2026_11_28_043_tier_upgrade_generic_plans': tierUpgradeGenericPlans,
  '2026_11_28_044_insight_day_start_plpgsql': insightDayStartPlpgsql,
};
