import { type Selectable, sql } from 'kysely';
import { z } from 'zod';
import type { DB } from '../../db/database.js';
import type { ShopsTable } from '../../db/schema.js';
import { inTransaction, type Queryable } from '../../db/transaction.js';
import { type Actor, changedFields, recordAudit } from '../audit/index.js';
import { endCustomerTokens } from '../customers/index.js';
import { startTimezonePeriod } from '../insights/index.js';
import { currencySchema, NotFoundError, parseInput, retrySetAside, RuleViolationError, validationErrorFrom } from '../kernel/index.js';
import { MAX_AMOUNT } from '../ledger/index.js';
import { changeTierSettings, EXPIRY_DAYS_MAX, EXPIRY_MODES, type ExpirySettings, signUpBonusSince, switchExpiryMode, type TierSettings, tierSettingsSchema } from '../program/index.js';

/**
 * A shop's own settings. `rateLimitPerMinute` and `webhookRetentionDays` are overrides: null means
 * the server's default (RATE_LIMIT_PER_MINUTE, WEBHOOK_RETENTION_DAYS).
 */
export type ShopSettings = {
  /** Points for the referrer per referee; 0 grants nothing. */
  referrerPoints: number;
  /** Points for the referee on sign-up; 0 grants nothing. */
  refereePoints: number;
  rateLimitPerMinute: number | null;
  webhookRetentionDays: number | null;
  /** ISO 4217: orders in another currency earn nothing; place_order rules count in it. */
  currency: string;
  /** IANA: the shop's days (birthdays, per-day action limits) start at its midnight. */
  timezone: string;
  /** Days an order's points wait before they can be spent (returns are still likely); 0: at once. */
  pendingDays: number;
  /** What expires and when (expiry.ts); changes apply from then on. */
  expiry: ExpirySettings;
  /** What VIP tiers count (tiers.ts). */
  tiers: TierSettings;
  /** Origins whose pages may call /storefront/graphql (CORS); empty: no browser page may. */
  storefrontOrigins: string[];
  /** Test orders (Shopify's `test`) earn points; off by default. */
  earnOnTestOrders: boolean;
  /** Shopify customers who signed up (created_at) since then get the sign-up bonus; default: when the shop connected Shopify. */
  signUpBonusSince: Date;
  /** An expired discount code gives its points back; off by default, as the peers do. */
  returnPointsOnCodeExpiry: boolean;
  /** A fully refunded or cancelled order gives back the points of the codes it used; off by default. */
  returnCodePointsOnRefund: boolean;
  /** Days before a code's expiry its redemptions/expiring event goes out; 0 (default): none. */
  codeWarningDays: number;
  /** Days an audit log row is kept (default 365). */
  auditRetentionDays: number;
};

/** Wide enough for any real shop, narrow enough that a typo cannot switch the limit off. */
export const RATE_LIMIT_BOUNDS = { min: 1, max: 10_000 } as const;
/** At least a day to look into a failure; at most a quarter of payloads and attempts to store. */
export const WEBHOOK_RETENTION_DAYS_BOUNDS = { min: 1, max: 90 } as const;
/** Longer than any return window; points held longer are a promise, not a balance. */
export const PENDING_DAYS_MAX = 365;
/** A week to notice a change at least; ten years at most (the database's check says the same). */
export const AUDIT_RETENTION_DAYS_BOUNDS = { min: 7, max: 3650 } as const;

export function isTimeZone(zone: string): boolean {
  try {
    new Intl.DateTimeFormat('en', { timeZone: zone });
    return true;
  } catch {
    return false;
  }
}

/** Enough for a shop's domains and staging sites; a list is not a wildcard. */
export const STOREFRONT_ORIGINS_MAX = 20;

/** An origin as browsers send it: http(s), a host, a port only when not the default; no path. */
const originSchema = z
  .string()
  .trim()
  .max(255)
  .transform((value, ctx) => {
    const url = URL.canParse(value) ? new URL(value) : null;
    if (!url || !['http:', 'https:'].includes(url.protocol) || url.origin === 'null' || url.href !== `${url.origin}/` || value.endsWith('/')) {
      ctx.addIssue({ code: 'custom', message: 'expected an origin such as https://shop.example.com (scheme, host and port only; no path, no trailing slash)' });
      return z.NEVER;
    }
    return url.origin;
  });

const rewardPoints = z.number().int().min(0).max(MAX_AMOUNT);

/** Omitted fields keep their value; null resets an override to the server default. */
export const shopSettingsInputSchema = z.strictObject({
  referrerPoints: rewardPoints.optional(),
  refereePoints: rewardPoints.optional(),
  rateLimitPerMinute: z.number().int().min(RATE_LIMIT_BOUNDS.min).max(RATE_LIMIT_BOUNDS.max).nullable().optional(),
  webhookRetentionDays: z
    .number()
    .int()
    .min(WEBHOOK_RETENTION_DAYS_BOUNDS.min)
    .max(WEBHOOK_RETENTION_DAYS_BOUNDS.max)
    .nullable()
    .optional(),
  currency: currencySchema.optional(),
  timezone: z.string().trim().max(64).refine(isTimeZone, 'not an IANA time zone (such as Europe/Paris)').optional(),
  pendingDays: z.number().int().min(0).max(PENDING_DAYS_MAX).optional(),
  expiry: z
    .strictObject({
      mode: z.enum(EXPIRY_MODES).optional(),
      days: z.number().int().min(1).max(EXPIRY_DAYS_MAX).optional(),
      warningDays: z.number().int().min(0).max(EXPIRY_DAYS_MAX - 1).optional(),
    })
    .optional(),
  tiers: tierSettingsSchema.optional(),
  storefrontOrigins: z.array(originSchema).max(STOREFRONT_ORIGINS_MAX).optional(),
  earnOnTestOrders: z.boolean().optional(),
  /** A Date (GraphQL's DateTime) or an ISO string; null: back to the default (when the shop connected Shopify). */
  signUpBonusSince: z.union([z.date(), z.iso.datetime({ offset: true }).transform((s) => new Date(s))]).nullable().optional(),
  returnPointsOnCodeExpiry: z.boolean().optional(),
  returnCodePointsOnRefund: z.boolean().optional(),
  codeWarningDays: z.number().int().min(0).max(365).optional(),
  auditRetentionDays: z.number().int().min(AUDIT_RETENTION_DAYS_BOUNDS.min).max(AUDIT_RETENTION_DAYS_BOUNDS.max).optional(),
});

// Bumped by every settings change in this process, so caches of settings (the rate limiter's
// per-shop limit) drop what they read before it: a change takes effect here at once.
let generation = 0;

/** Changes whenever a shop's settings change in this process; caches compare it to what they stored. */
export function shopSettingsGeneration(): number {
  return generation;
}

const COLUMNS = [
  'referral_referrer_points',
  'referral_referee_points',
  'rate_limit_per_minute',
  'webhook_retention_days',
  'currency',
  'timezone',
  'pending_days',
  'expiry_mode',
  'expiry_days',
  'expiry_warning_days',
  'tier_metric',
  'tier_window',
  'tier_window_days',
  'storefront_origins',
  'earn_on_test_orders',
  'sign_up_bonus_since',
  'return_points_on_code_expiry',
  'return_code_points_on_refund',
  'code_warning_days',
  'audit_retention_days',
  'shopify_connected_at',
  'created_at',
] as const;

function toSettings(row: Pick<Selectable<ShopsTable>, (typeof COLUMNS)[number]>): ShopSettings {
  return {
    referrerPoints: row.referral_referrer_points,
    refereePoints: row.referral_referee_points,
    rateLimitPerMinute: row.rate_limit_per_minute,
    webhookRetentionDays: row.webhook_retention_days,
    currency: row.currency,
    timezone: row.timezone,
    pendingDays: row.pending_days,
    expiry: { mode: row.expiry_mode as ExpirySettings['mode'], days: row.expiry_days, warningDays: row.expiry_warning_days },
    tiers: { metric: row.tier_metric as TierSettings['metric'], window: row.tier_window as TierSettings['window'], days: row.tier_window_days },
    storefrontOrigins: row.storefront_origins,
    earnOnTestOrders: row.earn_on_test_orders,
    signUpBonusSince: signUpBonusSince(row),
    returnPointsOnCodeExpiry: row.return_points_on_code_expiry,
    returnCodePointsOnRefund: row.return_code_points_on_refund,
    codeWarningDays: row.code_warning_days,
    auditRetentionDays: row.audit_retention_days,
  };
}

function shopNotFound(shopId: string) {
  return new NotFoundError('shop_not_found', `no shop with id ${shopId}`);
}

export async function getShopSettings(db: Queryable, shopId: string): Promise<ShopSettings> {
  const row = await db.selectFrom('shops').select(COLUMNS).where('id', '=', shopId).executeTakeFirst();
  if (!row) throw shopNotFound(shopId);
  return toSettings(row);
}

/**
 * The one writer of shop settings (GraphQL shopSettingsUpdate and shopReferralSettingsUpdate); `now`
 * is when it takes effect. With an actor, the fields that changed are audited as `kind`.
 */
export async function updateShopSettings(
  db: DB,
  shopId: string,
  input: unknown,
  now = new Date(),
  audit?: { actor: Actor | undefined; kind: string },
): Promise<{ settings: ShopSettings }> {
  const data = parseInput(shopSettingsInputSchema, input);
  const changes = {
    referral_referrer_points: data.referrerPoints,
    referral_referee_points: data.refereePoints,
    rate_limit_per_minute: data.rateLimitPerMinute,
    webhook_retention_days: data.webhookRetentionDays,
    currency: data.currency,
    timezone: data.timezone,
    pending_days: data.pendingDays,
    expiry_mode: data.expiry?.mode,
    expiry_days: data.expiry?.days,
    expiry_warning_days: data.expiry?.warningDays,
    tier_metric: data.tiers?.metric,
    tier_window: data.tiers?.window,
    tier_window_days: data.tiers?.days,
    storefront_origins: data.storefrontOrigins && [...new Set(data.storefrontOrigins)],
    earn_on_test_orders: data.earnOnTestOrders,
    sign_up_bonus_since: data.signUpBonusSince,
    return_points_on_code_expiry: data.returnPointsOnCodeExpiry,
    return_code_points_on_refund: data.returnCodePointsOnRefund,
    code_warning_days: data.codeWarningDays,
    audit_retention_days: data.auditRetentionDays,
  };
  // What an order earns depends on these: an instance's cached program is stale (order-first-states.ts).
  const programChanges =
    data.currency !== undefined || data.pendingDays !== undefined || data.earnOnTestOrders !== undefined ? { program_version: sql<number>`program_version + 1` } : {};
  if (Object.values(changes).every((v) => v === undefined)) return { settings: await getShopSettings(db, shopId) };
  if (data.currency !== undefined) await refuseCurrencyInUse(db, shopId, data.currency);
  if (data.timezone !== undefined) changes.timezone = await databaseTimeZone(db, data.timezone);
  const row = await inTransaction(db, async (trx) => {
    // Insights' days: a new zone's start from now on (insights.ts); read before the zone changes.
    if (changes.timezone !== undefined) await startTimezonePeriod(trx, shopId, changes.timezone, now);
    // Locked FOR UPDATE before it is read: switchExpiryMode needs that lock, and two changes of mode (or of tier metric) wait for each other.
    const prior = audit?.actor ? await trx.selectFrom('shops').select(COLUMNS).where('id', '=', shopId).forUpdate().executeTakeFirst() : undefined;
    const before = data.expiry || data.tiers ? await trx.selectFrom('shops').select(['expiry_mode', 'tier_metric']).where('id', '=', shopId).forUpdate().executeTakeFirst() : undefined;
    // Kysely leaves undefined values out of the SET list: omitted fields keep their value.
    const after = await trx.updateTable('shops').set({ ...changes, ...programChanges }).where('id', '=', shopId).returning(COLUMNS).executeTakeFirst();
    if (!after) throw shopNotFound(shopId);
    if (after.expiry_warning_days >= after.expiry_days) {
      // The whole update is refused: nothing half-applied.
      throw new RuleViolationError('expiry_warning_too_late', `a warning ${after.expiry_warning_days} days before expiry cannot come before the points are earned (days: ${after.expiry_days})`, ['expiry', 'warningDays']);
    }
    if (before && before.expiry_mode !== after.expiry_mode) await switchExpiryMode(trx, shopId, after.expiry_mode as ExpirySettings['mode'], now);
    if (before && data.tiers) await changeTierSettings(trx, shopId, before, after, now);
    // Every instance's cached tokens of the shop carry its former origins, which CORS checks.
    if (data.storefrontOrigins) endCustomerTokens(trx, { shopId });
    if (prior && audit) await recordAudit(trx, shopId, audit.actor, { kind: audit.kind, subject: { type: 'shop', id: shopId }, ...changedFields(toSettings(prior), toSettings(after)) }, now);
    return after;
  });
  generation++;
  // A shop's day runs (or other due work) set aside under its former zone get their tries again.
  if (data.timezone !== undefined) await retrySetAside(db, { shopId });
  return { settings: toSettings(row) };
}

/**
 * The shop's days are computed by PostgreSQL too (expiry dates, tier metrics, insights), by its
 * own list of zones, which is not Intl's: "US/Pacific-New" is a zone to Intl and unknown to
 * PostgreSQL, and every write of a shop holding it would fail. A zone must be one both know;
 * returns PostgreSQL's spelling of it (names are matched without regard to case, as both do).
 */
async function databaseTimeZone(db: DB, zone: string): Promise<string> {
  const { rows } = await sql<{ name: string }>`select name from pg_timezone_names where lower(name) = lower(${zone}) order by name = ${zone} desc limit 1`.execute(db);
  if (!rows[0]) throw validationErrorFrom([{ path: ['timezone'], message: 'not a time zone the database knows (an old alias, such as US/Pacific-New?); use its IANA name, such as America/Los_Angeles' }]);
  return rows[0].name;
}

/**
 * place_order rules count money in the shop's currency, and orders were judged by it: once either
 * exists, a new currency would silently change what they mean (JPY has no cents).
 */
async function refuseCurrencyInUse(db: DB, shopId: string, currency: string): Promise<void> {
  const inUse = await db
    .selectFrom('shops')
    .select((eb) => [
      'currency',
      eb.exists(eb.selectFrom('orders').select('id').where('shop_id', '=', shopId)).as('has_orders'),
      eb.exists(eb.selectFrom('earning_rules').select('id').where('shop_id', '=', shopId).where('type', '=', 'place_order')).as('has_rules'),
    ])
    .where('id', '=', shopId)
    .executeTakeFirst();
  if (inUse && inUse.currency !== currency && (inUse.has_orders || inUse.has_rules)) {
    throw new RuleViolationError(
      'currency_in_use',
      `the shop's orders or place_order rules are in ${inUse.currency}; its currency can no longer change`,
      ['currency'],
    );
  }
}
