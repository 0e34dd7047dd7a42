import type { DB } from '../db/database.js';
import type { SecretBox } from '../domain/kernel/index.js';
import {
  claimSyncJobs, codesToSync, codeToSync, type CodeToSync, COLLECTIONS_RECONCILE_EVERY_MS, failSyncJob, finishSyncJob, gid, legacyId, openAdminConnection,
  type OpenAdminConnection, queueCodeSync, reconcilePosition, recordCodeRefused, recordCodeSynced, recordProductCollections, recordReconcilePage,
  recordWebhookRegistration, rescheduleSyncJob, returnSyncJob, SHOPIFY_TOPICS, shopsWithDueJobs, type SyncJob, unsyncCode,
} from '../domain/shopify/index.js';
import type { OutboxHandler } from '../events/outbox-relay.js';
import { shopLanes } from '../events/shop-lanes.js';
import type { Logger } from '../logger.js';
import { adminClient, type AdminClient, ShopifyAdminError, type StoreUrls } from './client.js';
import {
  DISCOUNT_CODE_BASIC_CREATE, DISCOUNT_CODE_BY_CODE, DISCOUNT_CODE_DEACTIVATE, DISCOUNT_CODE_FREE_SHIPPING_CREATE, type Operation, PRODUCT_COLLECTIONS,
  PRODUCTS_COLLECTIONS, WEBHOOK_SUBSCRIPTION_CREATE, WEBHOOK_SUBSCRIPTIONS,
} from './operations.js';
import { ShopThrottle } from './throttle.js';
import { adminToken } from './token.js';

/**
 * Tells Shopify what the sync jobs say (DESIGN.md "Shopify, the Admin side"): codes created and
 * deactivated, webhooks registered; and reads what it says of products' collections. One lane per shop with jobs due, each with several calls in
 * flight, each call waiting for its cost in the shop's bucket (throttle.ts); a lane claims its next
 * jobs while the current ones run, as many as the bucket will pay for soon, so a busy shop's calls
 * follow each other without a gap and no claimed job outlives its lease waiting for the bucket. A
 * throttled, failing or unreachable store slows only its own lane. Lanes are capped per worker;
 * shops whose jobs waited longest get the free lanes first. Any number of workers share the queue
 * through leases (sync-jobs.ts).
 */

/** Where Shopify sends the webhooks the connector registers. */
export const SHOPIFY_WEBHOOK_PATH = '/integrations/shopify/webhooks';
/** What most jobs cost in the bucket (a mutation), to size a lane's claims. */
const JOB_COST = DISCOUNT_CODE_BASIC_CREATE.cost;
/** A lane holds the jobs its shop's bucket pays for within this long... */
const CLAIM_AHEAD_MS = 2_000;
/** ...and a call that would wait longer than this for the bucket puts its job back, due when the bucket holds it (other workers spent it). */
const MAX_BUCKET_WAIT_MS = 5_000;

export type ShopifySyncOptions = {
  db: DB;
  logger: Logger;
  secrets: SecretBox;
  urls: StoreUrls;
  /** The service's public URL (PUBLIC_URL), which Shopify's webhooks are registered to; null: not set. */
  publicUrl: string | null;
  /** How long one call to Shopify may take (SHOPIFY_ADMIN_TIMEOUT_MS). */
  timeoutMs?: number;
  now?: () => number;
  /** Shops served at once by this worker. */
  lanes?: number;
  /** Calls in flight per shop (the bucket decides how many are sent; this bounds what one slow store holds). */
  perShop?: number;
  pollMs?: number;
  onCall?: (outcome: 'ok' | ShopifyAdminError['kind']) => void;
};

export type ShopifySyncWorker = {
  outboxHandler: OutboxHandler;
  start(): void;
  stop(): Promise<void>;
  wake(): void;
  /** Obtains a working token for the shop's connection, renewing a lapsing client-credentials one. */
  tokenFor(connection: OpenAdminConnection): Promise<string>;
};

export function createShopifySyncWorker(options: ShopifySyncOptions): ShopifySyncWorker {
  const { db, logger, secrets, urls, publicUrl } = options;
  const now = options.now ?? Date.now;
  const maxLanes = options.lanes ?? 16;
  const perShop = options.perShop ?? 16;
  const pollMs = options.pollMs ?? 500;
  const timeoutMs = options.timeoutMs ?? 15_000;
  // A claimed job waits its turn in the lane (CLAIM_AHEAD_MS), then makes up to two calls (a look-up
  // and a creation), each waiting for the bucket and then for Shopify: its lease outlasts all that.
  const leaseMs = CLAIM_AHEAD_MS + 2 * (MAX_BUCKET_WAIT_MS + timeoutMs) + timeoutMs;
  const throttle = new ShopThrottle();

  const tokenFor = (connection: OpenAdminConnection) => adminToken(db, secrets, urls, connection, now(), timeoutMs);

  /** Sends one call once the shop's bucket holds its cost, and keeps what the answer said of the bucket. */
  async function call<T>(shopId: string, client: AdminClient, operation: Operation, variables?: Record<string, unknown>): Promise<T> {
    for (;;) {
      const bucket = throttle.tooSmallFor(shopId, operation.cost);
      if (bucket !== null) throw new ShopifyAdminError('refused', `${operation.name} costs ${operation.cost} points, more than the store's whole bucket (${bucket})`);
      const wait = throttle.reserve(shopId, operation.cost, now());
      if (wait === 0) break;
      if (wait > MAX_BUCKET_WAIT_MS) throw new ShopifyAdminError('throttled', "the shop's bucket is spent");
      await new Promise((resolve) => setTimeout(resolve, wait));
      if (!lanes.running) throw new ShopifyAdminError('unavailable', 'the worker is stopping');
    }
    try {
      const { data, cost } = await client.request<T>(operation.query, variables);
      throttle.settle(shopId, operation.cost, cost?.throttle ?? null, now());
      options.onCall?.('ok');
      return data;
    } catch (err) {
      throttle.settle(shopId, operation.cost, err instanceof ShopifyAdminError ? (err.cost?.throttle ?? null) : null, now());
      if (err instanceof ShopifyAdminError) options.onCall?.(err.kind);
      throw err;
    }
  }

  /** Creates the job's code (read with its batch, when the lane claimed it). */
  async function createCode(shopId: string, client: AdminClient, job: SyncJob, code: CodeToSync | undefined): Promise<void> {
    if (!code || code.shopifySync === 'synced' || code.shopifySync === 'failed') return;
    // It ended before it reached Shopify: nothing to create.
    if (code.status !== 'issued') return unsyncCode(db, code.id);
    // A try after the first may follow one whose answer was lost (a crash, a timeout): the code may exist already.
    if (job.attempts > 1) {
      const found = await call<{ codeDiscountNodeByCode: { id: string } | null }>(shopId, client, DISCOUNT_CODE_BY_CODE, { code: code.code });
      if (found.codeDiscountNodeByCode) return recordCodeSynced(db, code.id, found.codeDiscountNodeByCode.id);
    }
    type Created = { codeDiscountNode: { id: string } | null; userErrors: Array<{ message: string; code: string | null; field: string[] | null }> };
    const data =
      code.discount.mutation === 'basic'
        ? (await call<{ discountCodeBasicCreate: Created }>(shopId, client, DISCOUNT_CODE_BASIC_CREATE, { discount: code.discount.input })).discountCodeBasicCreate
        : (await call<{ discountCodeFreeShippingCreate: Created }>(shopId, client, DISCOUNT_CODE_FREE_SHIPPING_CREATE, { discount: code.discount.input })).discountCodeFreeShippingCreate;
    if (data.codeDiscountNode) return recordCodeSynced(db, code.id, data.codeDiscountNode.id);
    const reason = data.userErrors.map((e) => `${e.message}${e.field ? ` (${e.field.join('.')})` : ''}`).join('; ') || 'Shopify created no discount';
    await recordCodeRefused(db, shopId, code.id, code.code, reason);
  }

  async function deactivateCode(shopId: string, client: AdminClient, job: SyncJob): Promise<'done' | 'later'> {
    const code = await codeToSync(db, shopId, job.subject);
    if (!code || code.shopifySync === null || code.shopifySync === 'failed') return 'done';
    // Not created yet: its creation (which skips an ended code, or is under way) goes first.
    if (code.shopifySync === 'pending') return 'later';
    type Deactivated = { discountCodeDeactivate: { userErrors: Array<{ message: string }> } };
    const data = await call<Deactivated>(shopId, client, DISCOUNT_CODE_DEACTIVATE, { id: code.shopifyId });
    if (data.discountCodeDeactivate.userErrors.length) throw new ShopifyAdminError('refused', data.discountCodeDeactivate.userErrors.map((e) => e.message).join('; '));
    return 'done';
  }

  async function registerWebhooks(shopId: string, client: AdminClient): Promise<void> {
    if (!publicUrl) {
      for (const topic of SHOPIFY_TOPICS) await recordWebhookRegistration(db, shopId, topic, 'failed', null, 'PUBLIC_URL is not set: Shopify needs the address to send webhooks to');
      return;
    }
    const uri = `${publicUrl.replace(/\/$/, '')}${SHOPIFY_WEBHOOK_PATH}`;
    type Subscriptions = { webhookSubscriptions: { nodes: Array<{ id: string; topic: string; uri: string }> } };
    const existing = (await call<Subscriptions>(shopId, client, WEBHOOK_SUBSCRIPTIONS)).webhookSubscriptions.nodes;
    for (const topic of SHOPIFY_TOPICS) {
      const enumName = topic.toUpperCase().replace('/', '_');
      const there = existing.find((s) => s.topic === enumName && s.uri === uri);
      if (there) {
        await recordWebhookRegistration(db, shopId, topic, 'registered', there.id, null);
        continue;
      }
      type Created = { webhookSubscriptionCreate: { webhookSubscription: { id: string } | null; userErrors: Array<{ message: string }> } };
      const created = (await call<Created>(shopId, client, WEBHOOK_SUBSCRIPTION_CREATE, { topic: enumName, subscription: { uri, format: 'JSON' } })).webhookSubscriptionCreate;
      if (created.webhookSubscription) await recordWebhookRegistration(db, shopId, topic, 'registered', created.webhookSubscription.id, null);
      else await recordWebhookRegistration(db, shopId, topic, 'failed', null, created.userErrors.map((e) => e.message).join('; '));
    }
  }

  /**
   * One page of the shop's collections reconcile (product-collections.ts): a job run reads one page
   * and is due again at once for the next, so no run outlasts its lease and other jobs of the shop
   * take turns with the pages; after the last it is due again in a day.
   */
  async function reconcileCollections(shopId: string, client: AdminClient, job: SyncJob): Promise<void> {
    const { cursor, startedAt } = await reconcilePosition(db, shopId, new Date(now()));
    type Page = {
      products: {
        nodes: Array<{ id: string; collections: { nodes: Array<{ id: string }>; pageInfo: { hasNextPage: boolean } } }>;
        pageInfo: { hasNextPage: boolean; endCursor: string | null };
      };
    };
    const { products } = await call<Page>(shopId, client, PRODUCTS_COLLECTIONS, { after: cursor });
    const page = {
      products: products.nodes.map((p) => ({ productId: legacyId(p.id), collectionIds: p.collections.nodes.map((c) => legacyId(c.id)) })),
      incomplete: products.nodes.filter((p) => p.collections.pageInfo.hasNextPage).map((p) => legacyId(p.id)),
      next: products.pageInfo.hasNextPage ? products.pageInfo.endCursor : null,
    };
    await recordReconcilePage(db, job, page, startedAt, new Date(now()));
  }

  /** One product's collections, all of them (a gone product is in none). */
  async function readProductCollections(shopId: string, client: AdminClient, job: SyncJob): Promise<void> {
    type Answer = { product: { collections: { nodes: Array<{ id: string }>; pageInfo: { hasNextPage: boolean; endCursor: string | null } } } | null };
    const collectionIds: string[] = [];
    let after: string | null = null;
    for (;;) {
      const { product }: Answer = await call<Answer>(shopId, client, PRODUCT_COLLECTIONS, { id: gid('Product', job.subject), after });
      if (!product) break;
      collectionIds.push(...product.collections.nodes.map((c) => legacyId(c.id)));
      if (!product.collections.pageInfo.hasNextPage) break;
      after = product.collections.pageInfo.endCursor;
    }
    await recordProductCollections(db, shopId, [{ productId: job.subject, collectionIds }], new Date(now()));
  }

  /** Jobs a lane claimed, with what they need: the shop's connection and client, and the batch's codes. */
  type Claimed = { job: SyncJob; connection: OpenAdminConnection; client: AdminClient; codes: Map<string, CodeToSync> };

  /** Does one job; returns when it is to be tried again without counting a try (throttled, or waiting on another job). */
  async function runJob({ job, connection, client, codes }: Claimed): Promise<void> {
    const { shopId } = connection;
    try {
      if (job.kind === 'code_create') await createCode(shopId, client, job, codes.get(job.subject));
      else if (job.kind === 'webhooks_register') await registerWebhooks(shopId, client);
      else if (job.kind === 'collections_reconcile') return await reconcileCollections(shopId, client, job);
      else if (job.kind === 'product_collections') await readProductCollections(shopId, client, job);
      else if ((await deactivateCode(shopId, client, job)) === 'later') return returnSyncJob(db, job, new Date(now() + 2_000));
      await finishSyncJob(db, job);
    } catch (err) {
      if (err instanceof ShopifyAdminError && err.kind === 'throttled') {
        return returnSyncJob(db, job, new Date(now() + throttle.throttled(shopId, JOB_COST, now())));
      }
      const reason = err instanceof Error ? err.message : String(err);
      const final = await failSyncJob(db, job, reason, new Date(now()), err instanceof ShopifyAdminError && err.kind === 'refused');
      if (final && job.kind === 'code_create') {
        const code = await codeToSync(db, shopId, job.subject);
        if (code) await recordCodeRefused(db, shopId, code.id, code.code, reason);
      }
      // The reconcile recurs: a pass that failed for good is tried again at its next time (from where it got to).
      if (final && job.kind === 'collections_reconcile') await rescheduleSyncJob(db, job, new Date(now() + COLLECTIONS_RECONCILE_EVERY_MS));
      if (!(err instanceof ShopifyAdminError)) logger.error({ err, shopId, kind: job.kind }, 'a Shopify sync job failed');
    }
  }

  /** Claims the shop's next due jobs, up to `limit`; [] when none are due. */
  async function claim(shopId: string, limit: number): Promise<Claimed[]> {
    for (;;) {
      const jobs = await claimSyncJobs(db, shopId, new Date(now()), limit, leaseMs);
      if (jobs.length === 0) return [];
      const connection = await openAdminConnection(db, secrets, shopId);
      if (!connection) {
        // Disconnected since the jobs were queued: there is no one to tell.
        for (const job of jobs) await finishSyncJob(db, job);
        continue;
      }
      let client: AdminClient;
      try {
        client = adminClient(urls, connection.shopDomain, await tokenFor(connection), timeoutMs);
      } catch (err) {
        const reason = err instanceof Error ? err.message : String(err);
        for (const job of jobs) await failSyncJob(db, job, reason, new Date(now()));
        continue;
      }
      const codes = await codesToSync(db, shopId, jobs.filter((j) => j.kind === 'code_create').map((j) => j.subject));
      return jobs.map((job) => ({ job, connection, client, codes }));
    }
  }

  /**
   * Serves one shop until it has nothing due: `perShop` slots take jobs, in the order they were
   * queued, from what the lane has claimed; when that runs low, the next jobs are claimed while
   * the slots work, as many as the shop's bucket pays for within CLAIM_AHEAD_MS.
   */
  async function lane(shopId: string): Promise<void> {
    const claimed: Claimed[] = [];
    let claiming: Promise<void> | undefined;
    // Nothing more to claim for now: none due, or the bucket pays for none soon (the run loop
    // starts the lane again when both are there).
    let drained = false;
    const claimMore = () =>
      (claiming ??= (async () => {
        const room = Math.min(perShop * 4, throttle.affordable(shopId, JOB_COST, CLAIM_AHEAD_MS, now())) - claimed.length;
        if (room <= 0) {
          drained = claimed.length === 0;
          return;
        }
        const more = await claim(shopId, room);
        drained = more.length === 0;
        claimed.push(...more);
      })().finally(() => {
        claiming = undefined;
      }));
    const slot = async () => {
      while (lanes.running) {
        if (claimed.length <= perShop && !drained) {
          const pending = claimMore();
          if (claimed.length === 0) await pending;
        }
        const next = claimed.shift();
        if (next) await runJob(next);
        else if (drained) return;
      }
    };
    const slots = await Promise.allSettled(Array.from({ length: perShop }, slot));
    await claiming?.catch(() => undefined);
    // Stopping: jobs claimed but not begun are due again now, for whichever worker runs next.
    for (const { job } of claimed.splice(0)) await returnSyncJob(db, job, new Date(now()));
    const failed = slots.find((s) => s.status === 'rejected');
    if (failed) throw failed.reason;
  }

  const lanes = shopLanes({
    name: 'Shopify sync',
    logger,
    maxLanes,
    pollMs,
    // A shop whose bucket pays for no job now gets no lane until it does.
    dueShops: (busy, free) => shopsWithDueJobs(db, new Date(now()), [...busy, ...throttle.spent(JOB_COST, now())], free),
    lane,
  });

  return {
    outboxHandler: { name: 'shopify-sync', inTransaction: (trx, events) => queueCodeSync(trx, events), afterCommit: () => lanes.wake() },
    start: () => lanes.start(),
    stop: () => lanes.stop(),
    wake: () => lanes.wake(),
    tokenFor,
  };
}
