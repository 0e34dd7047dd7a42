import { z } from 'zod';
import type { StaffLimits } from './rate-limit/staff.js';
import type { StorefrontLimits } from './rate-limit/storefront.js';
import { parseAllowedHosts } from './webhooks/url-policy.js';

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;

// Empty strings count as "not set", so `DATABASE_URL= npm start` means the embedded default.
const optionalString = z.preprocess((v) => (v === '' ? undefined : v), z.string().optional());

const configSchema = z.object({
  PORT: z.coerce.number().int().min(0).max(65535).default(3000),
  HOST: z.string().min(1).default('127.0.0.1'),
  DATA_DIR: z.string().min(1).default('./data'),
  DATABASE_URL: optionalString.pipe(
    z.string().regex(/^postgres(ql)?:\/\//, 'must be a postgres:// URL').optional(),
  ),
  DATABASE_POOL_SIZE: z.coerce.number().int().min(1).max(200).default(20),
  // Overload shedding: queries that may queue for a pooled connection once all are busy (the
  // request of the next one is answered 503 at once), and how long a queued one may wait before
  // it gets a 503. Queries, not requests: one GraphQL read runs several at once (a customer with
  // tier, progress and rewards, five), so 100 shed 15 % of 32 concurrent such reads.
  DATABASE_POOL_MAX_WAITING: z.coerce.number().int().min(0).max(100_000).default(1_000),
  DATABASE_POOL_ACQUIRE_TIMEOUT_MS: z.coerce.number().int().min(100).max(60_000).default(5_000),
  REDIS_URL: optionalString.pipe(
    z.string().regex(/^rediss?:\/\//, 'must be a redis:// URL').optional(),
  ),
  LOG_LEVEL: z.enum(LOG_LEVELS).default('info'),
  // The outbox relay and delivery worker run inside the server unless this is `off`
  // (then run them elsewhere with `npm run worker`).
  WORKER: z.enum(['on', 'off']).default('on'),
  // Prefix of every Redis key we write, so several deployments (or test runs) can share one Redis.
  REDIS_KEY_PREFIX: z.string().default('loyalty:'),
  // Per shop and per operation, for points, redemptions, referrals and GraphQL; the webhook
  // endpoints have the contract's fixed limits. A shop's rate_limit_per_minute overrides it.
  RATE_LIMIT_PER_MINUTE: z.coerce.number().int().min(1).max(1_000_000_000).default(600),
  // /storefront/graphql (docs/storefront.md): operations a minute per customer, and requests a
  // minute per client IP (many customers may share one behind a carrier's NAT).
  STOREFRONT_RATE_PER_CUSTOMER: z.coerce.number().int().min(1).max(1_000_000_000).default(120),
  STOREFRONT_RATE_PER_IP: z.coerce.number().int().min(1).max(1_000_000_000).default(1_200),
  // Multiplies the contract's fixed limits of the webhook endpoints (30, 5, 60, 10 a minute): a
  // private deployment whose own tools read deliveries more often may raise them.
  // Staff doors (docs/console.md): failed sign-ins (and invite or reset link tries) allowed per
  // account and per client IP within the window, after which they are answered 429 until it ends.
  STAFF_SIGNIN_FAILURES_PER_ACCOUNT: z.coerce.number().int().min(1).max(1_000_000).default(10),
  STAFF_SIGNIN_FAILURES_PER_IP: z.coerce.number().int().min(1).max(1_000_000).default(50),
  STAFF_SIGNIN_WINDOW_SECONDS: z.coerce.number().int().min(1).max(86_400).default(900),
  RATE_LIMIT_FIXED_MULTIPLIER: z.coerce.number().int().min(1).max(10_000).default(1),
  // Hosts, IPs or CIDRs webhooks may target although private (tests, local demos). Empty in production.
  WEBHOOK_ALLOWED_HOSTS: z
    .string()
    .default('')
    .transform((v) => v.split(',').map((h) => h.trim()).filter(Boolean))
    .superRefine((hosts, ctx) => {
      try {
        parseAllowedHosts(hosts);
      } catch (err) {
        ctx.addIssue({ code: 'custom', message: (err as Error).message });
      }
    }),
  // Live GraphQL subscriptions (graphql-ws and SSE) one shop may hold open: across all instances
  // when REDIS_URL is set, else on each.
  SUBSCRIPTIONS_PER_SHOP: z.coerce.number().int().min(1).max(1_000_000).default(100),
  // graphql-ws sockets one shop may hold open, counted like SUBSCRIPTIONS_PER_SHOP.
  WEBSOCKETS_PER_SHOP: z.coerce.number().int().min(1).max(1_000_000).default(100),
  // /storefront/graphql's live subscriptions, and its sockets, counted apart from the shop's own:
  // per customer (a few tabs) and per shop (its visitors at once).
  STOREFRONT_SUBSCRIPTIONS_PER_CUSTOMER: z.coerce.number().int().min(1).max(1_000).default(5),
  STOREFRONT_SUBSCRIPTIONS_PER_SHOP: z.coerce.number().int().min(1).max(1_000_000).default(10_000),
  // How long a request may take to arrive, headers and body: a slower one gets 408 and its
  // connection is closed, so a client that announces a body and never sends it holds nothing.
  REQUEST_TIMEOUT_MS: z.coerce.number().int().min(100).max(3_600_000).default(30_000),
  // 64 hex characters (32 bytes) encrypting webhook signing secrets at rest; the same on every
  // instance. Unset: a key file in DATA_DIR, created on first start.
  // Webhook delivery: per-attempt timeout, attempts in flight per worker, and how long delivery
  // records (payloads, attempts) are kept.
  WEBHOOK_TIMEOUT_MS: z.coerce.number().int().min(100).max(60_000).default(15_000),
  // 128: a single endpoint needs about 64 in flight for the full rate (npm run bench -- webhooks),
  // and the per-endpoint cap below leaves the other half to every other endpoint.
  WEBHOOK_CONCURRENCY: z.coerce.number().int().min(1).max(1_000).default(128),
  WEBHOOK_RETENTION_DAYS: z.coerce.number().min(0.001).max(3650).default(30),
  // How long a relayed outbox event is kept (hours): relayed, it has done its work, and each
  // webhook delivery keeps its own payload. Unrelayed events are never purged.
  OUTBOX_RETENTION_HOURS: z.coerce.number().min(0).max(87_600).default(24),
  // How long a requested shop deletion waits (days), cancellable meanwhile (docs/operations.md "A shop leaves").
  SHOP_DELETION_GRACE_DAYS: z.coerce.number().min(0).max(365).default(7),
  // How long a settled e-mail's record (sent, failed, skipped…) is kept (days): the history a shop
  // reads per customer. Queued e-mails are never purged.
  MAIL_RETENTION_DAYS: z.coerce.number().min(0.001).max(3650).default(180),
  // Attempts in flight per subscription over all workers, so one slow or hung endpoint holds at
  // most this many of the slots (DESIGN.md "Tenant isolation"). Unset: half of WEBHOOK_CONCURRENCY.
  WEBHOOK_MAX_IN_FLIGHT_PER_ENDPOINT: z.coerce.number().int().min(1).max(1_000).optional(),
  SECRETS_KEY: optionalString.pipe(z.string().regex(/^[0-9a-fA-F]{64}$/, 'must be 64 hexadecimal characters').optional()),
  // The address Shopify reaches this service at (https://loyalty.example.com): the Shopify
  // connector registers its webhooks there. Unset: they are not registered (the connection says so).
  PUBLIC_URL: optionalString.pipe(z.url({ protocol: /^https?$/ }).optional()),
  // Where a store's Admin API is: {shop} is its myshopify.com domain. Changed only to point the
  // connector at a stand-in (tests, demos without a store).
  // How long one call to a store's Admin API may take; a sync job's lease (how long a killed
  // worker's jobs wait for another) follows from it.
  SHOPIFY_ADMIN_TIMEOUT_MS: z.coerce.number().int().min(100).max(60_000).default(15_000),
  // Each wait on a shop's SMTP server (connecting, its greeting, each answer): a hung server holds
  // its own shop's mail this long per try, and a claimed e-mail's lease is 6 × this + 5 s.
  MAIL_TIMEOUT_MS: z.coerce.number().int().min(100).max(60_000).default(10_000),
  SHOPIFY_ADMIN_BASE_URL: z.string().regex(/^https?:\/\/.*\{shop\}/, 'must be a URL containing {shop}').default('https://{shop}'),
});

export type Config = {
  port: number;
  host: string;
  dataDir: string;
  databaseUrl: string | undefined;
  databasePoolSize: number;
  databasePoolMaxWaiting: number;
  databasePoolAcquireTimeoutMs: number;
  redisUrl: string | undefined;
  storefrontLimits: StorefrontLimits;
  staffLimits: StaffLimits;
  logLevel: (typeof LOG_LEVELS)[number];
  worker: boolean;
  redisKeyPrefix: string;
  rateLimitPerMinute: number;
  rateLimitFixedMultiplier: number;
  webhookAllowedHosts: string[];
  secretsKey: string | undefined;
  webhookTimeoutMs: number;
  webhookConcurrency: number;
  webhookRetentionDays: number;
  outboxRetentionHours: number;
  shopDeletionGraceDays: number;
  mailRetentionDays: number;
  webhookMaxInFlightPerEndpoint: number | undefined;
  subscriptionsPerShop: number;
  storefrontSubscriptions: { perShop: number; perCustomer: number };
  websocketsPerShop: number;
  requestTimeoutMs: number;
  publicUrl: string | null;
  shopifyAdminBaseUrl: string;
  shopifyAdminTimeoutMs: number;
  mailTimeoutMs: number;
};

export class ConfigError extends Error {}

/** Reads the configuration from the environment; a bad value throws one readable line. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const parsed = configSchema.safeParse(env);
  if (!parsed.success) {
    const issues = parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`);
    throw new ConfigError(`invalid configuration: ${issues.join('; ')}`);
  }
  const c = parsed.data;
  return {
    port: c.PORT,
    host: c.HOST,
    dataDir: c.DATA_DIR,
    databaseUrl: c.DATABASE_URL,
    databasePoolSize: c.DATABASE_POOL_SIZE,
    databasePoolMaxWaiting: c.DATABASE_POOL_MAX_WAITING,
    databasePoolAcquireTimeoutMs: c.DATABASE_POOL_ACQUIRE_TIMEOUT_MS,
    redisUrl: c.REDIS_URL,
    logLevel: c.LOG_LEVEL,
    worker: c.WORKER === 'on',
    redisKeyPrefix: c.REDIS_KEY_PREFIX,
    rateLimitPerMinute: c.RATE_LIMIT_PER_MINUTE,
    rateLimitFixedMultiplier: c.RATE_LIMIT_FIXED_MULTIPLIER,
    staffLimits: {
      failuresPerAccount: c.STAFF_SIGNIN_FAILURES_PER_ACCOUNT,
      failuresPerIp: c.STAFF_SIGNIN_FAILURES_PER_IP,
      windowSeconds: c.STAFF_SIGNIN_WINDOW_SECONDS,
    },
    storefrontLimits: { perCustomerPerMinute: c.STOREFRONT_RATE_PER_CUSTOMER, perIpPerMinute: c.STOREFRONT_RATE_PER_IP },
    webhookAllowedHosts: c.WEBHOOK_ALLOWED_HOSTS,
    secretsKey: c.SECRETS_KEY,
    webhookTimeoutMs: c.WEBHOOK_TIMEOUT_MS,
    webhookConcurrency: c.WEBHOOK_CONCURRENCY,
    webhookRetentionDays: c.WEBHOOK_RETENTION_DAYS,
    outboxRetentionHours: c.OUTBOX_RETENTION_HOURS,
    shopDeletionGraceDays: c.SHOP_DELETION_GRACE_DAYS,
    mailRetentionDays: c.MAIL_RETENTION_DAYS,
    webhookMaxInFlightPerEndpoint: c.WEBHOOK_MAX_IN_FLIGHT_PER_ENDPOINT,
    subscriptionsPerShop: c.SUBSCRIPTIONS_PER_SHOP,
    websocketsPerShop: c.WEBSOCKETS_PER_SHOP,
    storefrontSubscriptions: { perShop: c.STOREFRONT_SUBSCRIPTIONS_PER_SHOP, perCustomer: c.STOREFRONT_SUBSCRIPTIONS_PER_CUSTOMER },
    requestTimeoutMs: c.REQUEST_TIMEOUT_MS,
    publicUrl: c.PUBLIC_URL ?? null,
    shopifyAdminBaseUrl: c.SHOPIFY_ADMIN_BASE_URL,
    shopifyAdminTimeoutMs: c.SHOPIFY_ADMIN_TIMEOUT_MS,
    mailTimeoutMs: c.MAIL_TIMEOUT_MS,
  };
}
