import type { ColumnType, Generated, Insertable, Selectable } from 'kysely';

/** Columns the database fills in when a row is inserted. */
type Defaulted<T> = ColumnType<T, T | undefined, T>;

export interface ShopsTable {
  id: string;
  name: string;
  created_at: Defaulted<Date>;
  referral_referrer_points: Defaulted<number>;
  referral_referee_points: Defaulted<number>;
  /** Overrides RATE_LIMIT_PER_MINUTE for this shop; null means the default. */
  rate_limit_per_minute: ColumnType<number | null, number | null | undefined, number | null>;
  /** Overrides WEBHOOK_RETENTION_DAYS for this shop's delivery records; null means the default. */
  webhook_retention_days: ColumnType<number | null, number | null | undefined, number | null>;
  /** ISO 4217; orders in another currency earn nothing. */
  currency: Defaulted<string>;
  /** IANA time zone: the shop's days (birthdays, per-day limits) begin at its midnight. */
  timezone: Defaulted<string>;
  /** Insights' days are days of `timezone` from this instant on; before it, see shop_timezones. Null: always. */
  timezone_days_from: ColumnType<Date | null, Date | null | undefined, Date | null>;
  /** Days an order's points stay pending before they can be spent; 0: at once. */
  pending_days: Defaulted<number>;
  /** Bumped by every change to what an order earns: place_order rules, currency, pending_days, earn_on_test_orders (order-first-states.ts caches by it). */
  program_version: Defaulted<number>;
  /** Bumped by every write of the shop's points_redemptions (migration 2026_11_28_042's trigger): the storefront's cached reward pages are good while it holds. */
  rewards_version: ColumnType<string, never, never>;
  /** What expires (src/domain/program/expiry.ts): 'none', 'inactivity' or 'per_earn'. */
  expiry_mode: Defaulted<string>;
  expiry_days: Defaulted<number>;
  /** Days before an expiry its warning goes out; 0: no warnings. */
  expiry_warning_days: Defaulted<number>;
  /** VIP tiers (src/domain/program/tiers.ts): 'points_earned' or 'amount_spent'. */
  tier_metric: Defaulted<string>;
  /** 'lifetime', 'calendar_year' or 'rolling_days' (tier_window_days). */
  tier_window: Defaulted<string>;
  tier_window_days: Defaulted<number>;
  /** The shop has tiers: its metric is kept, per customer and day. */
  tiers_on: Defaulted<boolean>;
  shopify_domain: ColumnType<string | null, string | null | undefined, string | null>;
  /** Origins (scheme://host[:port]) whose pages may call /storefront/graphql with this shop's tokens. */
  storefront_origins: Defaulted<string[]>;
  /** Sealed (src/webhooks/secret-box.ts), bound to the shop id. */
  shopify_webhook_secret: ColumnType<string | null, string | null | undefined, string | null>;
  /** Test orders (Shopify's `test`) earn only with this on. */
  earn_on_test_orders: Defaulted<boolean>;
  /** The sign-up bonus goes to Shopify customers who signed up at or after this; null: since shopify_connected_at. */
  sign_up_bonus_since: ColumnType<Date | null, Date | null | undefined, Date | null>;
  /** When the shop first connected its Shopify store. */
  shopify_connected_at: ColumnType<Date | null, Date | null | undefined, Date | null>;
  /** An expired code gives its points back (a refund_redemption entry). */
  return_points_on_code_expiry: Defaulted<boolean>;
  /** A fully refunded or cancelled order gives back the points of the codes it used. */
  return_code_points_on_refund: Defaulted<boolean>;
  /** Days before a code's expiry its warning goes out; 0: none. */
  code_warning_days: Defaulted<number>;
  /** Days an audit_log row is kept (7 to 3650). */
  audit_retention_days: Defaulted<number>;
}

export interface ApiKeysTable {
  id: string;
  shop_id: string;
  prefix: string;
  key_hash: string;
  created_at: Defaulted<Date>;
  revoked_at: Date | null;
}

export interface CustomersTable {
  id: string;
  shop_id: string;
  shopify_customer_id: string;
  email: string;
  birthday: string | null;
  points: Defaulted<number>;
  /** Earned from orders, waiting for the shop's pendingDays: not spendable, not in `points`. */
  pending_points: Defaulted<number>;
  created_at: Defaulted<Date>;
  updated_at: Defaulted<Date>;
  /** Set when the customer was erased: the row is a tombstone (e-mail, shop customer id and birthday replaced). */
  erased_at: ColumnType<Date | null, Date | null | undefined, Date | null>;
}

export interface ActivitiesTable {
  seq: Generated<number>;
  id: string;
  shop_id: string;
  customer_id: string;
  type: string;
  setting_type: string;
  description: string | null;
  note: string | null;
  old_points: number;
  new_points: number;
  created_at: Defaulted<Date>;
  updated_at: Defaulted<Date>;
}

export interface OutboxEventsTable {
  seq: Generated<number>;
  id: string;
  shop_id: string;
  type: string;
  data: ColumnType<unknown, string, string>;
  created_at: Defaulted<Date>;
  relayed_at: ColumnType<Date | null, Date | null | undefined, Date | null>;
}

export interface IdempotencyKeysTable {
  shop_id: string;
  key: string;
  request_hash: string;
  response_status: number | null;
  response_body: string | null;
  created_at: Defaulted<Date>;
  completed_at: Date | null;
}

/** numeric columns: the drivers return strings; we write numbers. */
type Decimal = ColumnType<string | number, number, number>;
/** jsonb lists: written as JSON text, read back parsed. */
type JsonList = ColumnType<string[], string | undefined, string>;

export interface PointsRedemptionsTable {
  id: string;
  shop_id: string;
  status: boolean;
  name: string;
  type: string;
  discount_prefix: string;
  exchange_type: string;
  reward_value: number;
  discount_value: Decimal;
  purchase_type: string;
  apply_product_option: string;
  apply_products: JsonList;
  apply_collections: JsonList;
  apply_variants: JsonList;
  minimum_requirement_type: string;
  minimum_requirement_value: ColumnType<string | number | null, number | null, number | null>;
  combinations: JsonList;
  expire_date_type: string;
  expire_days: number | null;
  expire_date: Date | null;
  sort_index: number;
  created_at: Defaulted<Date>;
  updated_at: Defaulted<Date>;
}

export interface DiscountCodesTable {
  seq: Generated<number>;
  id: string;
  shop_id: string;
  customer_id: string;
  reward_id: string;
  activity_id: string;
  code: string;
  type: string;
  value: Decimal;
  currency: string | null;
  variant_id: string | null;
  points_amount: number;
  expires_at: Date | null;
  created_at: Defaulted<Date>;
  /** Its life (migration 2026_11_27_020): issued, then exactly one of used, expired, cancelled. */
  status: Defaulted<CodeStatus>;
  used_at: ColumnType<Date | null, Date | null | undefined, Date | null>;
  /** The shop's id of the order that used it. */
  order_id: ColumnType<string | null, string | null | undefined, string | null>;
  /** Used by an order of another customer than the one it was issued to (the checkout let it through). */
  other_customer: Defaulted<boolean>;
  cancelled_at: ColumnType<Date | null, Date | null | undefined, Date | null>;
  /** When its expiry warning went out. */
  warned_at: ColumnType<Date | null, Date | null | undefined, Date | null>;
  /** The refund_redemption entry that gave its points back: at most one. */
  returned_activity_id: ColumnType<string | null, string | null | undefined, string | null>;
  /** Its copy in Shopify (migration 2026_11_27_022): null when the shop has no Admin connection. */
  shopify_sync: ColumnType<ShopifySyncState | null, ShopifySyncState | null | undefined, ShopifySyncState | null>;
  shopify_id: ColumnType<string | null, string | null | undefined, string | null>;
  /** Shopify's reason when it refused the code. */
  shopify_error: ColumnType<string | null, string | null | undefined, string | null>;
}

export type CodeStatus = 'issued' | 'used' | 'expired' | 'cancelled';
export type ShopifySyncState = 'pending' | 'synced' | 'failed';

/** How the service signs in to a shop's Shopify store (migration 2026_11_27_022). */
export interface ShopifyAdminConnectionsTable {
  shop_id: string;
  auth: 'access_token' | 'client_credentials';
  /** Sealed: the shop's Admin API access token, or the client-credentials grant's current one. */
  access_token: string | null;
  client_id: string | null;
  /** Sealed. */
  client_secret: string | null;
  token_expires_at: Date | null;
  scopes: ColumnType<string[], string, string>;
  connected_at: Defaulted<Date>;
}

export interface ShopifyWebhookRegistrationsTable {
  shop_id: string;
  topic: string;
  state: 'pending' | 'registered' | 'failed';
  shopify_id: string | null;
  error: string | null;
  updated_at: Defaulted<Date>;
}

export interface ShopifySyncJobsTable {
  id: string;
  shop_id: string;
  kind: string;
  subject: Defaulted<string>;
  due_at: Defaulted<Date>;
  attempts: Defaulted<number>;
  last_error: ColumnType<string | null, string | null | undefined, string | null>;
  failed_at: ColumnType<Date | null, Date | null | undefined, Date | null>;
  created_at: Defaulted<Date>;
}
export type ShopifySyncJobRow = Selectable<ShopifySyncJobsTable>;

export interface ShopifyImportsTable {
  shop_id: string;
  since: Date;
  phase: 'customers' | 'orders' | 'done';
  bulk_operation_id: ColumnType<string | null, string | null | undefined, string | null>;
  result_url: ColumnType<string | null, string | null | undefined, string | null>;
  object_count: ColumnType<number | null, number | null | undefined, number | null>;
  lines_applied: Defaulted<number>;
  customers_applied: Defaulted<number>;
  orders_applied: Defaulted<number>;
  orders_skipped: Defaulted<number>;
  started_at: Defaulted<Date>;
  finished_at: ColumnType<Date | null, Date | null | undefined, Date | null>;
  error: ColumnType<string | null, string | null | undefined, string | null>;
}
export type ShopifyImportRow = Selectable<ShopifyImportsTable>;

export interface ReferralCodesTable {
  customer_id: string;
  shop_id: string;
  code: string;
  created_at: Defaulted<Date>;
}

export interface ReferralsTable {
  seq: Generated<number>;
  id: string;
  shop_id: string;
  referee_id: string;
  referrer_id: string;
  referral_code: string;
  status: Defaulted<boolean>;
  created_at: Defaulted<Date>;
  updated_at: Defaulted<Date>;
}

export interface WebhookSubscriptionsTable {
  id: string;
  shop_id: string;
  topic: string;
  callback_url: string;
  previous_secret_valid_until: Date | null;
  created_at: Defaulted<Date>;
  updated_at: Defaulted<Date>;
  /** Endpoint health: probing allows one attempt in flight; disabled, none (deliveries are kept). */
  status: Defaulted<WebhookSubscriptionStatus>;
  /** Failed attempts since the last success. */
  consecutive_failures: Defaulted<number>;
  /** The first failure since the last success; null while the last attempt succeeded. */
  failing_since: Date | null;
  disabled_reason: string | null;
}

export type WebhookSubscriptionStatus = 'enabled' | 'probing' | 'disabled';

export interface WebhookSecretsTable {
  id: string;
  subscription_id: string;
  /** AES-256-GCM, see src/webhooks/secret-box.ts. */
  sealed_secret: string;
  created_at: Defaulted<Date>;
  /** Null for the current secret; set when it is rotated out. */
  expires_at: Date | null;
}

export interface WebhookDeliveriesTable {
  id: string;
  shop_id: string;
  subscription_id: string;
  event_id: string;
  topic: string;
  /** The topic's group (`points` of `points/added`), generated by the database. */
  topic_group: ColumnType<string, never, never>;
  status: WebhookDeliveryStatus;
  created_at: Defaulted<Date>;
  updated_at: Defaulted<Date>;
  /** The envelope as signed and sent, byte for byte. */
  payload: Defaulted<string>;
  /** When a worker should pick the row up next (scheduled attempt, replay, or lease expiry); null: nothing due. */
  due_at: Date | null;
  next_attempt_at: Date | null;
  attempt_count: Defaulted<number>;
  scheduled_attempts: Defaulted<number>;
  last_attempt_at: Date | null;
  last_response_status: number | null;
  last_error: string | null;
  lease_token: string | null;
  replay_requested: Defaulted<boolean>;
  current_trigger: Defaulted<WebhookAttemptTrigger>;
  status_before_send: WebhookDeliveryStatus | null;
}

export type WebhookDeliveryStatus = 'pending' | 'sending' | 'succeeded' | 'retrying' | 'failed' | 'cancelled';
export type WebhookAttemptTrigger = 'scheduled' | 'manual';

export interface WebhookDeliveryAttemptsTable {
  id: string;
  delivery_id: string;
  attempted_at: Date;
  trigger: WebhookAttemptTrigger;
  url: string;
  response_status: number | null;
  duration_ms: number;
  error: string | null;
  /** The first 2 KiB of the response body. */
  response_body: string | null;
}

/** jsonb objects: written as JSON text, read back parsed. */
type Json<T> = ColumnType<T, string, string>;

export type EarningRuleType = 'place_order' | 'sign_up' | 'birthday' | 'custom';
export type ActionLimit = 'once' | 'day' | 'week' | 'unlimited';

export interface EarningRulesTable {
  id: string;
  shop_id: string;
  type: EarningRuleType;
  name: string;
  active: Defaulted<boolean>;
  earn_point: number;
  /** place_order: earn_point points per this much eligible money, in minor units of the shop's currency. */
  spent_minor: number | null;
  include_product_ids: ColumnType<string[], string | undefined, string>;
  exclude_product_ids: ColumnType<string[], string | undefined, string>;
  include_collection_ids: ColumnType<string[], string | undefined, string>;
  exclude_collection_ids: ColumnType<string[], string | undefined, string>;
  include_shipping: Defaulted<boolean>;
  include_tax: Defaulted<boolean>;
  /** place_order: gift-card lines count too. */
  include_gift_cards: Defaulted<boolean>;
  /** custom: the action's name, unique per shop. */
  action: string | null;
  action_limit: ActionLimit | null;
  created_at: Defaulted<Date>;
  updated_at: Defaulted<Date>;
}

export type OrderStatus = 'pending' | 'paid' | 'partially_refunded' | 'refunded' | 'cancelled';

export interface OrdersTable {
  seq: Generated<number>;
  /** Ours. */
  id: string;
  shop_id: string;
  customer_id: string;
  /** The shop's own order id, as in PUT /orders/{orderId}. */
  order_id: string;
  currency: string;
  subtotal_minor: number;
  shipping_minor: number;
  tax_minor: number;
  total_minor: number;
  refunded_minor: number;
  status: OrderStatus;
  /** A test order: earns only when the shop's earn_on_test_orders is on. */
  test: Defaulted<boolean>;
  line_items: Json<unknown[]>;
  processed_at: Date | null;
  source_updated_at: Date | null;
  state_hash: string;
  earn_snapshot: ColumnType<unknown | null, string | null | undefined, string | null>;
  earn_note: string | null;
  points_earned: Defaulted<number>;
  points_pending: Defaulted<number>;
  points_clawed_back: Defaulted<number>;
  unrecovered_points: Defaulted<number>;
  created_at: Defaulted<Date>;
  updated_at: Defaulted<Date>;
  /** The discount codes the order carried, as given (`[{ code, amount }]`; unknown ones too). */
  discount_codes: ColumnType<OrderDiscountCode[], string | undefined, string>;
}

export type OrderDiscountCode = { code: string; amount: string };

/** per_earn expiry: a credit's points still in the balance; a customer's lots sum to their balance. */
export interface PointLotsTable {
  id: Generated<string>;
  shop_id: string;
  customer_id: string;
  points: number;
  expires_at: Date;
  /** When its warning is due; null once warned, or with no warnings. */
  warn_at: Date | null;
  created_at: Date;
}

/** inactivity expiry: when a customer's whole balance expires, moved by each points activity. */
export interface ExpiryTimersTable {
  customer_id: string;
  shop_id: string;
  expires_at: Date;
  warn_at: Date | null;
}

/** The expiry dates a customer was warned of (once each). */
export interface ExpiryWarningsTable {
  customer_id: string;
  expires_at: Date;
}

/** A customer's storefront credential (customer-access-tokens.ts): only its hash is kept. */
export interface CustomerAccessTokensTable {
  id: string;
  shop_id: string;
  customer_id: string;
  prefix: string;
  token_hash: string;
  expires_at: Date;
  revoked_at: Date | null;
  created_at: Defaulted<Date>;
}

export type StaffRoleName = 'owner' | 'program_manager' | 'support' | 'viewer';

export interface StaffAccountsTable {
  id: string;
  email: string;
  name: string;
  password_hash: string;
  created_at: Defaulted<Date>;
  password_changed_at: Defaulted<Date>;
}

export interface StaffMembershipsTable {
  shop_id: string;
  staff_id: string;
  role: StaffRoleName;
  created_at: Defaulted<Date>;
}

export interface StaffSessionsTable {
  id: string;
  token_hash: string;
  shop_id: string;
  staff_id: string;
  created_at: Defaulted<Date>;
  last_seen_at: Date;
  expires_at: Date;
}

export interface StaffLinkTokensTable {
  id: string;
  token_hash: string;
  kind: 'invite' | 'reset';
  shop_id: string;
  email: string | null;
  role: StaffRoleName | null;
  staff_id: string | null;
  expires_at: Date;
  used_at: Date | null;
  created_at: Defaulted<Date>;
}

export interface TiersTable {
  id: string;
  shop_id: string;
  name: string;
  /** Points, or minor units of the shop's currency (amount_spent). */
  threshold: number;
  /** The place_order multiplier in basis points (10,000 = ×1). */
  multiplier_bp: number;
  created_at: Defaulted<Date>;
  updated_at: Defaulted<Date>;
}

/** A customer the shop's tier program has seen, and the tier they hold. */
export interface TierMembersTable {
  customer_id: string;
  shop_id: string;
  tier_id: string | null;
  since: Date | null;
  /** While set, the tier is staff's override (tier_id) until then; nothing else moves it. */
  override_until: Date | null;
  override_reason: string | null;
  /** When the override was set. */
  override_at: Date | null;
}

/** A customer's metric on one shop-local day. */
export interface TierMetricDaysTable {
  customer_id: string;
  day: ColumnType<Date, string, string>;
  points: Defaulted<number>;
  spent: Defaulted<number>;
}

export interface PendingPointsTable {
  id: string;
  shop_id: string;
  customer_id: string;
  /** Our order id (orders.id), when an order earned them. */
  order_id: string | null;
  /** Still held; a refund before available_at lowers it. */
  points: number;
  available_at: Date;
  released_at: Date | null;
  created_at: Defaulted<Date>;
}

/** An item of due work that failed (scheduling.ts): waiting for its next try, or set aside. */
export interface DueWorkFailuresTable {
  /** The DueWork's name: shopify_inbox, pending_points, point_expiry, birthdays, ... */
  kind: string;
  /** Its key within the kind: an inbox row, a pending row, a customer, a shop (day runs). */
  item: string;
  shop_id: string;
  attempts: number;
  /** The last failure's message. */
  reason: string;
  first_failed_at: Date;
  last_failed_at: Date;
  next_attempt_at: Date;
  /** Set after the last try: claims skip it until someone retries it. */
  set_aside_at: Date | null;
}

/** Daily work per shop: the shop-local day ('YYYY-MM-DD') to do next, due when it begins in the shop's time zone. */
export interface ShopDayRunsTable {
  shop_id: string;
  kind: 'birthdays' | 'tiers';
  day: string;
  due_at: Date;
  /** The tier evaluation's walk through the shop's members: the last customer done today. */
  after_id: ColumnType<string | null, string | null | undefined, string | null>;
}

export interface RuleAwardsTable {
  id: string;
  shop_id: string;
  rule_id: string;
  customer_id: string;
  /** 'once' (sign-up, custom once), the year (birthday), the shop-local day or ISO week (custom limits); null: unlimited. */
  period: string | null;
  /** custom actions: the shop's reference, unique per rule (idempotency). */
  reference: string | null;
  points: number;
  rule_snapshot: Json<unknown>;
  created_at: Defaulted<Date>;
}

/** Program insights' rollups (src/domain/insights/insights.ts): points moved per shop, 15-minute bucket and stripe (-1: folded). */
export interface InsightBucketsTable {
  shop_id: string;
  bucket: Date;
  stripe: number;
  issued_orders: ColumnType<string, number | undefined, number>;
  issued_rules: ColumnType<string, number | undefined, number>;
  issued_manual: ColumnType<string, number | undefined, number>;
  issued_referrals: ColumnType<string, number | undefined, number>;
  removed_manual: ColumnType<string, number | undefined, number>;
  redeemed: ColumnType<string, number | undefined, number>;
  expired: ColumnType<string, number | undefined, number>;
  clawed_back: ColumnType<string, number | undefined, number>;
  pending: ColumnType<string, number | undefined, number>;
  /** Customers first marked active on their local day by an entry of this bucket (see insight_active_days). */
  active_members: ColumnType<string, number | undefined, number>;
  /** Customers created in the bucket, less those of them deleted. */
  members: ColumnType<string, number | undefined, number>;
}

/**
 * Folded buckets (of insight_buckets, insight_rewards) by the shop's local day (`day`: its start,
 * as insight_day_start places it): what compaction folded, added in the statement that folds it.
 * Striped rows are not in them yet.
 */
export type InsightDaysTable = Omit<InsightBucketsTable, 'bucket' | 'stripe'> & { day: Date };
export type InsightRewardDaysTable = Omit<InsightRewardsTable, 'bucket' | 'stripe'> & { day: Date };

/**
 * A shop's time zones over time, for insights' days (src/domain/insights/insights.ts): from `since`, the
 * days are those of `timezone`, after the day in progress then (carried_day, from carried_from)
 * has run until carried_until. Written by changes of zone; the first row ('-infinity') holds the
 * zone before the first change.
 */
export interface ShopTimezonesTable {
  shop_id: string;
  since: Date;
  timezone: string;
  carried_day: string | null;
  carried_from: Date | null;
  carried_until: Date | null;
}

/** Who was active on a shop's local day, kept while the day can still get entries: the first mark counts them. */
export interface InsightActiveDaysTable {
  shop_id: string;
  day: string;
  customer_id: string;
  /** The bucket whose rollup counted the customer (null for markers written before migration 018). */
  bucket: Date | null;
}

/** Redemptions per shop, bucket, reward and stripe; `discount` in the reward's unit. */
export interface InsightRewardsTable {
  shop_id: string;
  reward_id: string;
  bucket: Date;
  stripe: number;
  codes: ColumnType<string, number | undefined, number>;
  points: ColumnType<string, number | undefined, number>;
  discount: ColumnType<string, string | undefined, string>;
  /** Codes of the reward that ended in the bucket (migration 2026_11_27_020). */
  used: ColumnType<string, number | undefined, number>;
  expired: ColumnType<string, number | undefined, number>;
  cancelled: ColumnType<string, number | undefined, number>;
}

export interface ShopifyInboxTable {
  id: string;
  shop_id: string;
  /** X-Shopify-Webhook-Id: a second delivery of the same id is dropped. */
  webhook_id: string;
  topic: string;
  /** The raw body, as Shopify signed it. */
  body: string;
  received_at: Defaulted<Date>;
  processed_at: Date | null;
  attempts: Defaulted<number>;
  next_attempt_at: Defaulted<Date>;
  /** Why it could not be applied (visible to the shop); null while fine. */
  error: string | null;
  /** The Shopify order it is about (orders/* and refunds/create). */
  shopify_order_id: string | null;
  /** A refund stored before its order: applied once one of the order's webhooks is. */
  awaits_order: Defaulted<boolean>;
}

/** The latest state of each Shopify customer applied, by Shopify's updated_at: an older one changes nothing. */
export interface ShopifyCustomersTable {
  shop_id: string;
  shopify_customer_id: string;
  updated_at: Date;
}

/** What Shopify has said of one order, so its state can be rebuilt whatever order webhooks come in. */
export interface ShopifyOrdersTable {
  shop_id: string;
  shopify_order_id: string;
  /** The latest order body received (by Shopify's updated_at), as Shopify sent it. */
  order_body: unknown | null;
  /** Every refund received (alone or inside an order body), by its id. */
  refunds: Defaulted<unknown>;
}

/** Which collections a store's product is in, as the Admin API last said (no row: not read yet). */
export interface ShopifyProductCollectionsTable {
  shop_id: string;
  product_id: string;
  collection_ids: ColumnType<string[], string, string>;
  refreshed_at: Date;
}

/** Where a shop's reconcile of its products' collections is: a pass reads the catalogue a page at a time. */
export interface ShopifyCollectionReconcilesTable {
  shop_id: string;
  cursor: ColumnType<string | null, string | null | undefined, string | null>;
  started_at: ColumnType<Date | null, Date | null | undefined, Date | null>;
  finished_at: ColumnType<Date | null, Date | null | undefined, Date | null>;
  again: Defaulted<boolean>;
}

/** A change by a person or an API key (src/domain/audit): who, when, what, before and after. */
export interface AuditLogTable {
  id: string;
  shop_id: string;
  at: Date;
  actor_kind: 'staff' | 'api_key';
  actor_id: string;
  /** The e-mail or the key's prefix at the time: kept when the actor is removed. */
  actor_label: string;
  kind: string;
  subject_type: string | null;
  subject_id: string | null;
  before: Json<unknown> | null;
  after: Json<unknown> | null;
}

/** A shop's SMTP server and sender (migration 028); the password sealed with the SecretBox, context `mail:<shop id>`. */
export interface ShopMailSettingsTable {
  shop_id: string;
  enabled: Defaulted<boolean>;
  smtp_host: Defaulted<string>;
  smtp_port: Defaulted<number>;
  smtp_security: Defaulted<'tls' | 'starttls' | 'none'>;
  smtp_user: ColumnType<string | null, string | null | undefined, string | null>;
  smtp_password_sealed: ColumnType<string | null, string | null | undefined, string | null>;
  from_name: Defaulted<string>;
  from_address: Defaulted<string>;
  /** The kinds of e-mail the shop sends (src/domain/mail/templates.ts). */
  kinds: Defaulted<string[]>;
  /** The BCP 47 language of dates and numbers in e-mails (migration 035); null: English. */
  locale: ColumnType<string | null, string | null | undefined, string | null>;
  updated_at: Defaulted<Date>;
}
export type ShopMailSettingsRow = Selectable<ShopMailSettingsTable>;

export type MailStatus = 'queued' | 'sent' | 'failed' | 'suppressed' | 'skipped';

/** One e-mail per (source, customer, kind): its queue entry (due_at, leased while sent) and its record. */
export interface MailMessagesTable {
  id: string;
  shop_id: string;
  customer_id: string;
  kind: string;
  /** What it is about: the event's id. */
  source: string;
  data: Defaulted<unknown>;
  status: Defaulted<MailStatus>;
  /** Null: nothing left to do. */
  due_at: ColumnType<Date | null, Date | null | undefined, Date | null>;
  attempts: Defaulted<number>;
  last_error: ColumnType<string | null, string | null | undefined, string | null>;
  to_address: ColumnType<string | null, string | null | undefined, string | null>;
  message_id: ColumnType<string | null, string | null | undefined, string | null>;
  sent_at: ColumnType<Date | null, Date | null | undefined, Date | null>;
  created_at: Defaulted<Date>;
  updated_at: Defaulted<Date>;
}
export type MailMessageRow = Selectable<MailMessagesTable>;

export interface MailPreferencesTable {
  customer_id: string;
  shop_id: string;
  unsubscribed_at: ColumnType<Date | null, Date | null | undefined, Date | null>;
  /** Overrides the shop's locale for this customer (migration 035). */
  locale: ColumnType<string | null, string | null | undefined, string | null>;
  /** Kinds of e-mail the customer opted out of. */
  kinds_off: Defaulted<string[]>;
  updated_at: Defaulted<Date>;
}

/** A shop's own subject and body for a kind of e-mail (migration 035); none: the built-in template. */
export interface MailTemplatesTable {
  shop_id: string;
  kind: string;
  subject: string;
  body: string;
  updated_at: Defaulted<Date>;
}

export interface MailSuppressionsTable {
  shop_id: string;
  address: string;
  reason: string;
  created_at: Defaulted<Date>;
}

export interface ShopDeletionsTable {
  shop_id: string;
  requested_at: Date;
  due_at: Date;
  /** Who asked: `requested` (staff or the CLI) or `shopify shop/redact`. */
  reason: string;
  cancelled_at: ColumnType<Date | null, Date | null | undefined, Date | null>;
  completed_at: ColumnType<Date | null, Date | null | undefined, Date | null>;
  /** Counted as batches go; bigint arrives as a string. */
  rows_deleted: ColumnType<string, number | string | undefined, number | string>;
  /** The first table of SHOP_TABLES that may still hold rows of the shop. */
  next_table: Defaulted<number>;
}

export interface ComplianceRequestsTable {
  id: string;
  shop_id: string;
  topic: string;
  /** exported | erased | unknown_customer | shop_deletion_scheduled */
  outcome: string;
  customer_id: string | null;
  shopify_request_id: string | null;
  orders_requested: ColumnType<unknown, string | null | undefined, string | null>;
  document: ColumnType<unknown, string | null | undefined, string | null>;
  received_at: Date;
}

export interface Database {
  shops: ShopsTable;
  api_keys: ApiKeysTable;
  customers: CustomersTable;
  activities: ActivitiesTable;
  outbox_events: OutboxEventsTable;
  idempotency_keys: IdempotencyKeysTable;
  points_redemptions: PointsRedemptionsTable;
  discount_codes: DiscountCodesTable;
  referral_codes: ReferralCodesTable;
  referrals: ReferralsTable;
  webhook_subscriptions: WebhookSubscriptionsTable;
  webhook_secrets: WebhookSecretsTable;
  webhook_deliveries: WebhookDeliveriesTable;
  webhook_delivery_attempts: WebhookDeliveryAttemptsTable;
  earning_rules: EarningRulesTable;
  orders: OrdersTable;
  pending_points: PendingPointsTable;
  point_lots: PointLotsTable;
  expiry_timers: ExpiryTimersTable;
  expiry_warnings: ExpiryWarningsTable;
  customer_access_tokens: CustomerAccessTokensTable;
  rule_awards: RuleAwardsTable;
  shop_day_runs: ShopDayRunsTable;
  tiers: TiersTable;
  tier_members: TierMembersTable;
  tier_metric_days: TierMetricDaysTable;
  shopify_inbox: ShopifyInboxTable;
  insight_buckets: InsightBucketsTable;
  insight_days: InsightDaysTable;
  insight_rewards: InsightRewardsTable;
  insight_reward_days: InsightRewardDaysTable;
  insight_active_days: InsightActiveDaysTable;
  shop_timezones: ShopTimezonesTable;
  shopify_orders: ShopifyOrdersTable;
  shopify_customers: ShopifyCustomersTable;
  due_work_failures: DueWorkFailuresTable;
  shopify_admin_connections: ShopifyAdminConnectionsTable;
  shopify_webhook_registrations: ShopifyWebhookRegistrationsTable;
  shopify_sync_jobs: ShopifySyncJobsTable;
  shopify_imports: ShopifyImportsTable;
  shopify_product_collections: ShopifyProductCollectionsTable;
  shopify_collection_reconciles: ShopifyCollectionReconcilesTable;
  staff_accounts: StaffAccountsTable;
  staff_memberships: StaffMembershipsTable;
  staff_sessions: StaffSessionsTable;
  staff_link_tokens: StaffLinkTokensTable;
  audit_log: AuditLogTable;
  shop_mail_settings: ShopMailSettingsTable;
  mail_messages: MailMessagesTable;
  mail_preferences: MailPreferencesTable;
  mail_suppressions: MailSuppressionsTable;
  shop_deletions: ShopDeletionsTable;
  compliance_requests: ComplianceRequestsTable;
  mail_templates: MailTemplatesTable;
}

export type CustomerRow = Selectable<CustomersTable>;
export type ActivityRow = Selectable<ActivitiesTable>;
export type NewActivity = Insertable<ActivitiesTable>;
export type PointsRedemptionRow = Selectable<PointsRedemptionsTable>;
export type DiscountCodeRow = Selectable<DiscountCodesTable>;
export type WebhookSubscriptionRow = Selectable<WebhookSubscriptionsTable>;
export type WebhookDeliveryRow = Selectable<WebhookDeliveriesTable>;
export type WebhookDeliveryAttemptRow = Selectable<WebhookDeliveryAttemptsTable>;
export type EarningRuleRow = Selectable<EarningRulesTable>;
export type OrderRow = Selectable<OrdersTable>;
export type PendingPointsRow = Selectable<PendingPointsTable>;
export type RuleAwardRow = Selectable<RuleAwardsTable>;
export type ShopifyInboxRow = Selectable<ShopifyInboxTable>;
