import { createHmac } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import type { FastifyInstance } from 'fastify';
import type { KyselyPlugin } from 'kysely';
import type { Config } from './config.js';
import { type DatabaseHandle, openDatabase } from './db/database.js';
import { migrateToLatest } from './db/migrate.js';
import { type PurgeOptions, vacuumPurged } from './db/purge.js';
import { auditPurge } from './domain/audit/index.js';
import { purgeExpiredCustomerAccessTokens } from './domain/customers/index.js';
import { purgeExpiredStaffRecords } from './domain/staff/index.js';
import { codeExpiry, codeWarnings } from './domain/codes/index.js';
import { compactInsights, purgeActiveMemberMarkers } from './domain/insights/index.js';
import { purgeRelayedOutboxEvents } from './domain/kernel/index.js';
import { pendingRelease, purgeExpiredIdempotencyKeys } from './domain/ledger/index.js';
import { birthdayRun, expiryWarnings, pointExpiry, tierEvaluation, tierOverrideEnd } from './domain/program/index.js';
import { createShopifyInbox, purgeProcessedShopifyWebhooks, SHOPIFY_INBOX_RETENTION_DAYS, syncJobCounts } from './domain/shopify/index.js';
import { answerShopifyCompliance } from './domain/data-rights/index.js';
import { shopDeletion } from './domain/shop-exit/index.js';
import { mailQueueStats } from './domain/mail/index.js';
import { createEventBus, type EventBus } from './events/bus.js';
import { createOutboxRelay, type OutboxHandler } from './events/outbox-relay.js';
import { createScheduler, type Scheduler } from './events/scheduler.js';
import { createMetrics } from './http/metrics.js';
import { createHttpServer } from './http/server.js';
import { createLogger, type Logger } from './logger.js';
import { createRateLimiter, type RateLimiter } from './rate-limit/limiter.js';
import { createStaffLimiter, type StaffLimiter } from './rate-limit/staff.js';
import { createStorefrontLimiter, type StorefrontLimiter } from './rate-limit/storefront.js';
import { createDeliveryWorker, type DeliveryWorker } from './webhooks/delivery-worker.js';
import { purgeOldMail } from './domain/mail/index.js';
import { createMailWorker, type MailWorker } from './mail/mail-worker.js';
import { createShopifyAdmin } from './shopify-admin/connect.js';
import { createShopifySyncWorker, type ShopifySyncWorker } from './shopify-admin/sync-worker.js';
import { createSecretBox, loadSecretsKey } from './webhooks/secret-box.js';
import { type Resolver, UrlPolicy } from './webhooks/url-policy.js';

export type App = {
  database: DatabaseHandle;
  logger: Logger;
  /** Committed events for live subscribers; stats() shows what is open. */
  bus: EventBus;
  /** Time-driven work (pending points becoming available); runs where the worker runs. */
  scheduler: Scheduler;
  /** The Fastify instance (its routes, `inject` for tests). */
  http: FastifyInstance;
  /** Listens on the configured host and port; resolves to the base URL. */
  start(): Promise<string>;
  /** Runs the outbox relay, the webhook delivery worker and the retention purges without serving HTTP (`npm run worker`). */
  startWorker(): void;
  /** Stops accepting, finishes in-flight requests, closes the database. Safe to call twice. */
  stop(): Promise<void>;
};

export type AppOptions = {
  logger?: Logger;
  /** How webhook callback host names resolve for the SSRF check; tests inject their own. */
  resolveHost?: Resolver;
  /** The clock (ms) of the rate limiter, of due work (pending points) and of staff sessions and links; tests move it by hand. */
  clock?: () => number;
  /** Kysely plugins over every query of the app; tests watch the statements a request sends. */
  databasePlugins?: KyselyPlugin[];
};

const HOUR = 60 * 60 * 1000;

export async function buildApp(config: Config, options: AppOptions = {}): Promise<App> {
  const logger = options.logger ?? createLogger(config.logLevel);
  const database = await openDatabase({
    url: config.databaseUrl,
    dataDir: config.dataDir, // used only without a url
    poolSize: config.databasePoolSize,
    maxWaiting: config.databasePoolMaxWaiting,
    acquireTimeoutMs: config.databasePoolAcquireTimeoutMs,
    plugins: options.databasePlugins,
  });
  let http: Awaited<ReturnType<typeof createHttpServer>>;
  let rateLimiter: RateLimiter | undefined;
  let storefrontLimiter: StorefrontLimiter | undefined;
  let staffLimiter: StaffLimiter | undefined;
  let deliveryWorker: DeliveryWorker;
  let shopifySync: ShopifySyncWorker;
  let mailWorker: MailWorker;
  let bus: EventBus | undefined;
  const scheduler = createScheduler({
    db: database.db,
    // Shopify's compliance webhooks are answered by data-rights, which sits above the connector.
    kinds: [pendingRelease, createShopifyInbox((trx, shopId, request, now) => answerShopifyCompliance(trx, shopId, request, now, config.shopDeletionGraceDays)), birthdayRun, expiryWarnings, pointExpiry, codeWarnings, codeExpiry, tierEvaluation, tierOverrideEnd, auditPurge, shopDeletion],
    logger,
    now: () => new Date(options.clock?.() ?? Date.now()),
    onKindFailure: (kind) => metrics.dueWorkKindFailed(kind),
  });
  const metrics = createMetrics({
    database,
    liveSubscriptions: () => bus?.stats().subscriptions ?? 0,
    dueWorkLag: () => scheduler.lag(),
    dueWorkFailures: () => scheduler.failures(),
    shopifySyncJobs: () => syncJobCounts(database.db),
    mailQueue: () => mailQueueStats(database.db, new Date(options.clock?.() ?? Date.now())),
  });
  try {
    const applied = await migrateToLatest(database.db);
    if (applied.length) logger.info({ migrations: applied }, 'database migrated');
    const secretsKey = loadSecretsKey({ secretsKey: config.secretsKey, dataDir: config.dataDir });
    if (secretsKey.source === 'file' && config.databaseUrl) {
      logger.warn('SECRETS_KEY is not set: webhook secrets are encrypted with the key file in DATA_DIR; give every instance the same SECRETS_KEY');
    }
    const webhooks = {
      db: database.db,
      urlPolicy: new UrlPolicy({ allowedHosts: config.webhookAllowedHosts, resolve: options.resolveHost }),
      secrets: createSecretBox(secretsKey.key),
    };
    deliveryWorker = createDeliveryWorker({
      db: database.db,
      logger,
      urlPolicy: webhooks.urlPolicy,
      secrets: webhooks.secrets,
      timeoutMs: config.webhookTimeoutMs,
      concurrency: config.webhookConcurrency,
      maxInFlightPerEndpoint: config.webhookMaxInFlightPerEndpoint,
      retentionMs: config.webhookRetentionDays * 24 * HOUR,
      onAttempt: (outcome) => metrics.webhookAttempt(outcome),
    });
    shopifySync = createShopifySyncWorker({
      db: database.db,
      logger,
      secrets: webhooks.secrets,
      urls: { baseUrlTemplate: config.shopifyAdminBaseUrl },
      publicUrl: config.publicUrl,
      timeoutMs: config.shopifyAdminTimeoutMs,
      now: options.clock,
      onCall: (outcome) => metrics.shopifyCall(outcome),
    });
    // Unsubscribe links are signed with a key of their own, derived from the secrets key: every
    // instance with the same SECRETS_KEY reads every other's links, and no other use shares it.
    const mail = {
      secrets: webhooks.secrets,
      timeoutMs: config.mailTimeoutMs,
      tokenKey: createHmac('sha256', secretsKey.key).update('mail-unsubscribe').digest(),
      publicUrl: config.publicUrl ?? `http://localhost:${config.port}`,
    };
    mailWorker = createMailWorker({
      db: database.db,
      logger,
      secrets: mail.secrets,
      tokenKey: mail.tokenKey,
      publicUrl: mail.publicUrl,
      timeoutMs: config.mailTimeoutMs,
      now: options.clock,
      onSend: (outcome) => metrics.mailSend(outcome),
    });
    const shopifyAdmin = createShopifyAdmin({ db: database.db, secrets: webhooks.secrets, urls: { baseUrlTemplate: config.shopifyAdminBaseUrl }, worker: shopifySync, now: options.clock });
    rateLimiter = await createRateLimiter({
      db: database.db,
      logger,
      redisUrl: config.redisUrl,
      defaultLimit: config.rateLimitPerMinute,
      fixedMultiplier: config.rateLimitFixedMultiplier,
      keyPrefix: config.redisKeyPrefix,
      clock: options.clock,
      onRejected: (operation) => metrics.rateLimited(operation),
    });
    bus = createEventBus({
      logger,
      redisUrl: config.redisUrl,
      keyPrefix: config.redisKeyPrefix,
      subscriptionsPerShop: config.subscriptionsPerShop,
      socketsPerShop: config.websocketsPerShop,
      storefront: config.storefrontSubscriptions,
    });
    storefrontLimiter = await createStorefrontLimiter({ limits: config.storefrontLimits, redisUrl: config.redisUrl, keyPrefix: config.redisKeyPrefix, logger });
    staffLimiter = await createStaffLimiter({ limits: config.staffLimits, redisUrl: config.redisUrl, keyPrefix: config.redisKeyPrefix, logger });
    http = await createHttpServer({
      db: database.db,
      logger,
      rateLimiter,
      storefrontLimiter,
      staffLimiter,
      webhooks,
      bus,
      shopifyAdmin,
      mail,
      metrics,
      requestTimeoutMs: config.requestTimeoutMs,
      publicUrl: config.publicUrl,
      now: () => new Date(options.clock?.() ?? Date.now()),
      shopDeletionGraceDays: config.shopDeletionGraceDays,
    });
  } catch (err) {
    await bus?.close();
    await rateLimiter?.close();
    await storefrontLimiter?.close();
    await staffLimiter?.close();
    await database.close();
    throw err;
  }

  // Consumers of committed events: webhook fan-out and live subscriptions register here.
  const outboxHandlers: OutboxHandler[] = [deliveryWorker.outboxHandler, shopifySync.outboxHandler, mailWorker.outboxHandler, bus.outboxHandler];
  // Local commits wake the relay at once; on PostgreSQL, events committed by other instances (a
  // server with WORKER=off beside `npm run worker`) are found by a short poll, so webhooks still
  // leave within tens of milliseconds. An empty poll is one index probe.
  const relay = createOutboxRelay({ db: database.db, logger, handlers: outboxHandlers, pollMs: database.kind === 'postgres' ? 50 : 250 });

  // Retention (docs/operations.md): one loop, where the worker runs, purges one table after another,
  // hourly and once at start. One purge at a time, each pausing between its batches, so live
  // traffic keeps its pace; stopping the server stops it between two batches.
  const purges: ReadonlyArray<readonly [string, readonly string[], (options: PurgeOptions) => Promise<number>]> = [
    ['expired idempotency keys', ['idempotency_keys'], (o) => purgeExpiredIdempotencyKeys(database.db, o)],
    ['old webhook deliveries', ['webhook_deliveries', 'webhook_delivery_attempts'], (o) => deliveryWorker.purge(o)],
    ['relayed outbox events', ['outbox_events'], (o) => purgeRelayedOutboxEvents(database.db, new Date(Date.now() - config.outboxRetentionHours * HOUR), o)],
    ['settled e-mails', ['mail_messages'], (o) => purgeOldMail(database.db, new Date((options.clock?.() ?? Date.now()) - config.mailRetentionDays * 24 * HOUR), o)],
    ['processed Shopify webhooks', ['shopify_inbox'], (o) => purgeProcessedShopifyWebhooks(database.db, new Date(Date.now() - SHOPIFY_INBOX_RETENTION_DAYS * 24 * HOUR), o)],
    ['expired customer access tokens', ['customer_access_tokens'], (o) => purgeExpiredCustomerAccessTokens(database.db, new Date(Date.now() - 24 * HOUR), o)],
    ['expired staff sessions and links', ['staff_sessions', 'staff_link_tokens'], (o) => purgeExpiredStaffRecords(database.db, new Date(options.clock?.() ?? Date.now()), o)],
    // Not a deletion of data: the insight rollups' stripes of past buckets, folded into one row each.
    ['striped insight rollups (folded)', ['insight_buckets', 'insight_rewards'], (o) => compactInsights(database.db, new Date(Date.now() - HOUR), o)],
    ['active-member markers of past days', ['insight_active_days'], (o) => purgeActiveMemberMarkers(database.db, new Date(Date.now() - 3 * 24 * HOUR), o)],
  ];
  const stopPurges = new AbortController();
  let purgeTimer: NodeJS.Timeout | undefined;
  let purging: Promise<void> | undefined;
  const runPurges = async () => {
    for (const [what, tables, purge] of purges) {
      try {
        const purged = await purge({ signal: stopPurges.signal });
        if (purged) logger.info({ purged }, `${what} purged`);
        // What it emptied is vacuumed at once (docs/operations.md "Retention"), not left to autovacuum.
        if (purged && !stopPurges.signal.aborted) await vacuumPurged(database, tables);
      } catch (err) {
        if (!stopPurges.signal.aborted) logger.warn({ err }, `purging ${what} failed`);
      }
    }
  };
  const schedulePurges = () => {
    purging ??= runPurges().finally(() => {
      purging = undefined;
    });
  };

  const startWorker = () => {
    relay.start();
    deliveryWorker.start();
    shopifySync.start();
    mailWorker.start();
    scheduler.start();
    if (purgeTimer || stopPurges.signal.aborted) return;
    schedulePurges();
    purgeTimer = setInterval(schedulePurges, HOUR);
    purgeTimer.unref();
  };

  let stopping: Promise<void> | undefined;
  return {
    database,
    logger,
    bus,
    scheduler,
    http,
    async start() {
      await http.listen({ port: config.port, host: config.host });
      if (config.worker) startWorker();
      const { port } = http.server.address() as AddressInfo;
      const host = config.host.includes(':') ? `[${config.host}]` : config.host;
      return `http://${host === '0.0.0.0' ? '127.0.0.1' : host}:${port}`;
    },
    startWorker,
    stop() {
      stopping ??= (async () => {
        clearInterval(purgeTimer);
        stopPurges.abort();
        await http.close();
        await relay.stop();
        await deliveryWorker.stop();
        await shopifySync.stop();
        await mailWorker.stop();
        await scheduler.stop();
        await purging;
        await bus.close();
        await rateLimiter.close();
        await storefrontLimiter.close();
        await staffLimiter.close();
        await database.close();
      })();
      return stopping;
    },
  };
}
