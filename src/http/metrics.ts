import type { FastifyInstance } from 'fastify';
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { DatabaseHandle, PoolStats } from '../db/database.js';
import type { FailureCounts } from '../domain/kernel/index.js';

/**
 * Operations metrics in the Prometheus text format, on a registry each app owns (two apps in one
 * process, as in tests, never share counters). Labels are route patterns, operation names and
 * status codes: never raw URLs, shop ids or keys.
 */
export type Metrics = {
  registry: Registry;
  /** The delivery worker reports every attempt it made (an attempt cut short by a stop is none). */
  webhookAttempt(outcome: { ok: boolean; statusCode: number | null }): void;
  /** The rate limiter reports each refusal, by the operation whose bucket was full. */
  rateLimited(operation: string): void;
  /** Counts and times one HTTP response. */
  httpResponse(labels: { method: string; route: string; status: number }, seconds: number | null): void;
  /** The scheduler reports each pass of a kind of due work that threw (the other kinds went on). */
  dueWorkKindFailed(kind: string): void;
  /** The Shopify sync worker reports each call to a store's Admin API: ok, or why it failed. */
  shopifyCall(outcome: string): void;
  /** The mail worker reports each e-mail it finished with, by outcome. */
  mailSend(outcome: string): void;
};

export type MetricSources = {
  database: DatabaseHandle;
  /** Open graphql-ws and SSE subscriptions (the event bus holds both). */
  liveSubscriptions: () => number;
  /** Seconds since the oldest due item of each kind of time-driven work fell due. */
  dueWorkLag: () => Promise<Record<string, number>>;
  /** Items of each kind set aside after their last try, and waiting for their next. */
  dueWorkFailures: () => Promise<Record<string, FailureCounts>>;
  /** Shopify sync jobs waiting (due, leased or between tries) and failed for good. */
  shopifySyncJobs: () => Promise<{ waiting: number; failed: number }>;
  /** E-mails with a send due, and the wait of the oldest already due. */
  mailQueue: () => Promise<{ waiting: number; lagSeconds: number }>;
};

const QUEUED_STATUSES = ['pending', 'retrying', 'sending'] as const;

export function createMetrics(sources: MetricSources): Metrics {
  const registry = new Registry();
  const registers = [registry];
  // RSS, heap, event-loop lag (nodejs_eventloop_lag_p99_seconds), GC, handles.
  collectDefaultMetrics({ register: registry });

  const httpRequests = new Counter({
    name: 'loyalty_http_requests_total',
    help: 'HTTP responses by method, route pattern and status',
    labelNames: ['method', 'route', 'status'] as const,
    registers,
  });
  const httpDuration = new Histogram({
    name: 'loyalty_http_request_duration_seconds',
    help: 'Time from request to response, by method and route pattern (SSE streams are not timed)',
    labelNames: ['method', 'route'] as const,
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers,
  });
  const attempts = new Counter({
    name: 'loyalty_webhook_delivery_attempts_total',
    help: 'Webhook delivery attempts: outcome delivered (2xx), rejected (another status) or no_response (network error, timeout, blocked)',
    labelNames: ['outcome', 'status'] as const,
    registers,
  });
  const shopifyCalls = new Counter({
    name: 'loyalty_shopify_admin_calls_total',
    help: 'Calls to shops\' Shopify Admin APIs: outcome ok, throttled, unavailable, unauthorized or refused',
    labelNames: ['outcome'] as const,
    registers,
  });
  const mailSends = new Counter({
    name: 'loyalty_mail_sends_total',
    help: 'E-mails to customers the mail worker finished with: outcome sent, retry (a temporary failure), failed, suppressed (the address refused for good) or skipped',
    labelNames: ['outcome'] as const,
    registers,
  });
  const kindFailures = new Counter({
    name: 'loyalty_due_work_kind_failures_total',
    help: 'Passes of a kind of due work that failed as a whole (its database gone, a bug; logged); the other kinds went on',
    labelNames: ['kind'] as const,
    registers,
  });
  const rateLimited = new Counter({
    name: 'loyalty_rate_limit_rejections_total',
    help: 'Requests refused with 429, by rate-limited operation',
    labelNames: ['operation'] as const,
    registers,
  });

  // Gauges read when scraped, so they cost nothing between scrapes.
  new Gauge({
    name: 'loyalty_live_subscriptions',
    help: 'Open live subscriptions (graphql-ws and SSE)',
    registers,
    collect() {
      this.set(sources.liveSubscriptions());
    },
  });
  const { database } = sources;
  // The gauges that read the database share one probe per scrape, its queries one after the
  // other: a scrape holds at most one pooled connection, and never queues for a second beside it.
  let probe:
    | Promise<{
        queued: Array<{ status: string; n: number | string }> | null;
        lag: Record<string, number> | null;
        failures: Record<string, FailureCounts> | null;
        sync: { waiting: number; failed: number } | null;
        mail: { waiting: number; lagSeconds: number } | null;
      }>
    | undefined;
  const probeDatabase = () =>
    (probe ??= (async () => {
      // One probe of the partial index on due_at; a scrape must not fail because the database is down.
      const queued = await database.db
        .selectFrom('webhook_deliveries')
        .select(['status', (eb) => eb.fn.countAll<number>().as('n')])
        .where('due_at', 'is not', null)
        .groupBy('status')
        .execute()
        .catch(() => null);
      const lag = await sources.dueWorkLag().catch(() => null);
      const failures = await sources.dueWorkFailures().catch(() => null);
      const sync = await sources.shopifySyncJobs().catch(() => null);
      const mail = await sources.mailQueue().catch(() => null);
      return { queued, lag, failures, sync, mail };
    })().finally(() => {
      probe = undefined;
    }));
  new Gauge({
    name: 'loyalty_webhook_deliveries_queued',
    help: 'Webhook deliveries with an attempt still due, by status (absent when the database did not answer)',
    labelNames: ['status'] as const,
    registers,
    async collect() {
      this.reset();
      const { queued } = await probeDatabase();
      if (!queued) return;
      for (const status of QUEUED_STATUSES) this.set({ status }, 0);
      for (const row of queued) this.set({ status: row.status }, Number(row.n));
    },
  });
  new Gauge({
    name: 'loyalty_shopify_sync_jobs',
    help: 'Shopify sync jobs (codes to create or deactivate, webhooks to register, catalogue reads): state waiting or failed (kept with Shopify\'s reason)',
    labelNames: ['state'] as const,
    registers,
    async collect() {
      this.reset();
      const { sync } = await probeDatabase();
      if (!sync) return;
      this.set({ state: 'waiting' }, sync.waiting);
      this.set({ state: 'failed' }, sync.failed);
    },
  });
  const mailGauge = (name: string, help: string, read: (mail: { waiting: number; lagSeconds: number }) => number) =>
    new Gauge({
      name,
      help,
      registers,
      async collect() {
        const { mail } = await probeDatabase();
        if (mail) this.set(read(mail));
      },
    });
  mailGauge('loyalty_mail_queued', 'E-mails to customers with a send still due (waiting, being sent, or between tries)', (m) => m.waiting);
  mailGauge('loyalty_mail_queue_lag_seconds', 'Seconds the oldest e-mail already due has waited for its send; 0 when none waits', (m) => m.lagSeconds);
  new Gauge({
    name: 'loyalty_due_work_lag_seconds',
    help: 'Seconds since the oldest still-waiting item of each kind of due work fell due (pending points, …); 0 when none waits',
    labelNames: ['kind'] as const,
    registers,
    async collect() {
      this.reset();
      const { lag } = await probeDatabase();
      for (const [kind, seconds] of Object.entries(lag ?? {})) this.set({ kind }, seconds);
    },
  });
  const failureGauge = (name: string, help: string, read: (counts: FailureCounts) => number) =>
    new Gauge({
      name,
      help,
      labelNames: ['kind'] as const,
      registers,
      async collect() {
        this.reset();
        const { failures } = await probeDatabase();
        for (const [kind, counts] of Object.entries(failures ?? {})) this.set({ kind }, read(counts));
      },
    });
  failureGauge('loyalty_due_work_failed_items', 'Items of due work set aside after their last try failed, by kind (the CLI\'s due-work retry tries them again)', (c) => c.setAside);
  failureGauge('loyalty_due_work_retrying_items', 'Items of due work whose last try failed, waiting for their next, by kind', (c) => c.retrying);
  const poolStats = database.poolStats;
  if (poolStats) {
    // PGlite is one embedded connection without a pool: these are PostgreSQL only.
    const poolGauge = (name: string, help: string, read: (s: PoolStats) => number) =>
      new Gauge({
        name,
        help,
        registers,
        collect() {
          this.set(read(poolStats()));
        },
      });
    poolGauge('loyalty_db_pool_connections', 'PostgreSQL connections open in the pool', (s) => s.total);
    poolGauge('loyalty_db_pool_idle_connections', 'Open pool connections not in use', (s) => s.idle);
    poolGauge('loyalty_db_pool_waiting_requests', 'Queries waiting for a pool connection (bounded by DATABASE_POOL_MAX_WAITING)', (s) => s.waiting);
  }

  return {
    registry,
    webhookAttempt({ ok, statusCode }) {
      const outcome = ok ? 'delivered' : statusCode === null ? 'no_response' : 'rejected';
      attempts.inc({ outcome, status: statusCode === null ? 'none' : String(statusCode) });
    },
    rateLimited(operation) {
      rateLimited.inc({ operation });
    },
    dueWorkKindFailed(kind) {
      kindFailures.inc({ kind });
    },
    shopifyCall(outcome) {
      shopifyCalls.inc({ outcome });
    },
    mailSend(outcome) {
      mailSends.inc({ outcome });
    },
    httpResponse({ method, route, status }, seconds) {
      httpRequests.inc({ method, route, status: String(status) });
      if (seconds !== null) httpDuration.observe({ method, route }, seconds);
    },
  };
}

/**
 * Counts every response under its route pattern (`unmatched` for a 404 without a route, so
 * scanners cannot mint label values) and serves GET /metrics. /metrics takes no API key: it is
 * for the operator's Prometheus and must not be exposed publicly (block it at the proxy).
 */
export function registerMetrics(app: FastifyInstance, metrics: Metrics): void {
  app.addHook('onResponse', async (request, reply) => {
    const streamed = String(reply.getHeader('content-type') ?? '').startsWith('text/event-stream');
    metrics.httpResponse(
      { method: request.method, route: request.routeOptions.url ?? 'unmatched', status: reply.statusCode },
      streamed ? null : reply.elapsedTime / 1000,
    );
  });
  app.get('/metrics', async (_request, reply) => {
    const body = await metrics.registry.metrics();
    return reply.header('content-type', metrics.registry.contentType).send(body);
  });
}
