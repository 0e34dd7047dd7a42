import { Readable } from 'node:stream';
import { createInterface } from 'node:readline';
import type { DB } from '../db/database.js';
import { RuleViolationError, type SecretBox } from '../domain/kernel/index.js';
import {
  applyImportBatch, beginShopifyImport, type BulkGroup, type BulkObject, finishImportPhase, type ImportPhase, openAdminConnection, parseShopifyJson,
  recordBulkOperation, recordBulkResult, recordImportError, restartImportPhase, type ShopifyImport,
} from '../domain/shopify/index.js';
import { adminClient, type AdminClient, ShopifyAdminError, type StoreUrls } from './client.js';
import { BULK_OPERATION, BULK_OPERATION_RUN_QUERY, historyQuery, type Operation } from './operations.js';
import { adminToken } from './token.js';

/**
 * `npm run cli -- shopify import --since DATE` (issue 34, item 5), the transport's part: each phase
 * (customers, then orders) is one bulk operation, started once (its id is kept before it is waited
 * for), polled by id until Shopify has written its JSONL, then streamed from its URL and applied a
 * batch of whole objects at a time (src/domain/shopify/history-import.ts keeps the position with
 * each batch). A rerun after a kill picks up whichever step it had reached: the same operation,
 * the same file, from the line it had reached.
 */

export type HistoryImportOptions = {
  db: DB;
  secrets: SecretBox;
  urls: StoreUrls;
  shopId: string;
  since: Date;
  /** Objects (a customer, or an order with its lines) per transaction. */
  batchSize?: number;
  now?: () => number;
  /** Longest wait between two reads of a bulk operation's status. */
  maxPollMs?: number;
  /** The phase's lines applied, of how many (known once its bulk operation completed). */
  onProgress?: (phase: ImportPhase, applied: number, total: number) => void;
};

export type HistoryImportResult = {
  state: ShopifyImport;
  /** The run took up an import a previous run had left unfinished. */
  resumed: boolean;
  /** What this run applied; the state holds the totals. */
  customers: number;
  orders: number;
  /** Objects left out, the first REPORT_LIMIT with their reason. */
  skipped: Array<{ id: string; reason: string }>;
  skippedCount: number;
};

export const DEFAULT_IMPORT_BATCH = 100;
const REPORT_LIMIT = 20;
/** Tries of a call that Shopify throttled or did not answer, before the run stops (a rerun goes on from there). */
const CALL_TRIES = 6;

export async function importShopifyHistory(options: HistoryImportOptions): Promise<HistoryImportResult> {
  const { db, secrets, urls, shopId } = options;
  const now = options.now ?? Date.now;
  const batchSize = options.batchSize ?? DEFAULT_IMPORT_BATCH;
  const connection = await openAdminConnection(db, secrets, shopId);
  if (!connection) {
    throw new RuleViolationError(
      'shopify_admin_not_connected',
      'the shop is not connected to its store\'s Admin API: connect it first (GraphQL shopifyAdminConnect, docs/api.md "Connect a Shopify store"), then import',
      ['shop'],
    );
  }
  const client = adminClient(urls, connection.shopDomain, await adminToken(db, secrets, urls, connection, now()).catch(refusal));
  const begun = await beginShopifyImport(db, shopId, options.since, new Date(now()));
  let state = begun.state;
  const result: HistoryImportResult = { state, resumed: begun.resumed, customers: 0, orders: 0, skipped: [], skippedCount: 0 };
  let restarted = false;

  while (state.phase !== 'done') {
    const phase: ImportPhase = state.phase;
    try {
      if (!state.bulkOperationId) state = await recordBulkOperation(db, shopId, phase, await startBulkQuery(client, historyQuery(phase, state.since)));
      if (state.objectCount === null) {
        const done = await completedBulk(client, state.bulkOperationId!, options.maxPollMs ?? 5_000);
        if ('failure' in done) {
          // A rerun starts the phase's operation afresh.
          state = await restartImportPhase(db, shopId, phase, done.failure);
          throw new RuleViolationError('shopify_bulk_operation_failed', `${done.failure}; run the import again to start it anew`);
        }
        state = await recordBulkResult(db, shopId, phase, done.url, done.objectCount);
      }
      options.onProgress?.(phase, state.linesApplied, state.objectCount!);
      if (state.resultUrl && !(await applyResult(options, state, phase, batchSize, now, result))) {
        // Shopify keeps a result a week: past that, the phase's operation is run again (what was applied stays applied).
        if (restarted) throw new RuleViolationError('shopify_bulk_result_gone', `the result of bulk operation ${state.bulkOperationId} cannot be downloaded`);
        restarted = true;
        state = await restartImportPhase(db, shopId, phase, null);
        continue;
      }
      state = await finishImportPhase(db, shopId, phase, new Date(now()));
    } catch (err) {
      const stopped = err instanceof ShopifyAdminError ? refusal(err) : err;
      if (stopped instanceof RuleViolationError) await recordImportError(db, shopId, phase, stopped.message).catch(() => undefined);
      throw stopped;
    }
  }
  return { ...result, state };
}

/** A Shopify failure as what the person running the import can act on. */
function refusal(err: unknown): never {
  if (!(err instanceof ShopifyAdminError)) throw err;
  const why = {
    unauthorized: 'Shopify refused the connection\'s credentials (connect the shop again)',
    refused: 'Shopify refused the import\'s request',
    throttled: 'Shopify kept throttling the import',
    unavailable: 'Shopify could not be reached',
  }[err.kind];
  throw new RuleViolationError(`shopify_${err.kind}`, `${why}: ${err.message}; nothing applied is lost, run the import again to go on`);
}

/** One call, tried again while Shopify throttles it or does not answer, a little longer each time. */
async function call<T>(client: AdminClient, operation: Operation, variables: Record<string, unknown>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return (await client.request<T>(operation.query, variables)).data;
    } catch (err) {
      const transient = err instanceof ShopifyAdminError && (err.kind === 'throttled' || err.kind === 'unavailable');
      if (!transient || attempt >= CALL_TRIES) throw err;
      await sleep(Math.min(500 * 2 ** attempt, 10_000));
    }
  }
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function startBulkQuery(client: AdminClient, query: string): Promise<string> {
  type Started = { bulkOperationRunQuery: { bulkOperation: { id: string } | null; userErrors: Array<{ message: string; code: string | null }> } };
  const { bulkOperationRunQuery: started } = await call<Started>(client, BULK_OPERATION_RUN_QUERY, { query });
  if (started.bulkOperation) return started.bulkOperation.id;
  const reason = started.userErrors.map((e) => (e.code ? `${e.message} (${e.code})` : e.message)).join('; ') || 'no bulk operation was created';
  throw new RuleViolationError('shopify_bulk_operation_refused', `Shopify refused the bulk operation: ${reason}`);
}

type BulkStatus = { id: string; status: string; errorCode: string | null; objectCount: string | number; url: string | null };

/** Waits for the bulk operation to end: its result, or why it has none. */
async function completedBulk(client: AdminClient, id: string, maxPollMs: number): Promise<{ url: string | null; objectCount: number } | { failure: string }> {
  for (let wait = 250; ; wait = Math.min(wait * 2, maxPollMs)) {
    const { bulkOperation: op } = await call<{ bulkOperation: BulkStatus | null }>(client, BULK_OPERATION, { id });
    if (!op) return { failure: `Shopify no longer knows bulk operation ${id}` };
    if (op.status === 'COMPLETED') return { url: op.url, objectCount: Number(op.objectCount) };
    if (op.status !== 'CREATED' && op.status !== 'RUNNING') {
      return { failure: `Shopify's bulk operation ${id} ended ${op.status}${op.errorCode ? ` (${op.errorCode})` : ''}` };
    }
    await sleep(wait);
  }
}

/**
 * Streams the phase's JSONL from the line the import reached and applies it a batch of whole objects
 * at a time. False when the file is gone (Shopify's signed URLs lapse).
 */
async function applyResult(
  options: HistoryImportOptions,
  state: ShopifyImport,
  phase: ImportPhase,
  batchSize: number,
  now: () => number,
  result: HistoryImportResult,
): Promise<boolean> {
  let response: Response;
  try {
    response = await fetch(state.resultUrl!);
  } catch (err) {
    throw new ShopifyAdminError('unavailable', `the bulk operation's result could not be downloaded: ${(err as Error).message}`);
  }
  if ([403, 404, 410].includes(response.status)) return false;
  if (!response.ok || !response.body) throw new ShopifyAdminError('unavailable', `the bulk operation's result answered HTTP ${response.status}`);

  let position = state.linesApplied;
  let from = position;
  let line = 0;
  let batch: BulkGroup[] = [];
  let applying = false;
  const flush = async (to: number) => {
    if (to === from) return;
    applying = true;
    const outcome = await applyImportBatch(options.db, options.shopId, phase, batch, from, to, new Date(now()));
    applying = false;
    result.customers += outcome.customers;
    result.orders += outcome.orders;
    result.skippedCount += outcome.skipped.length;
    result.skipped.push(...outcome.skipped.slice(0, REPORT_LIMIT - result.skipped.length));
    batch = [];
    from = to;
    options.onProgress?.(phase, to, state.objectCount!);
  };
  const lines = createInterface({ input: Readable.fromWeb(response.body as import('node:stream/web').ReadableStream), crlfDelay: Infinity });
  try {
    for await (const text of lines) {
      line++;
      if (line <= state.linesApplied || text.trim() === '') continue;
      let object: BulkObject;
      try {
        object = parseShopifyJson(text) as BulkObject;
      } catch {
        throw new RuleViolationError('shopify_bulk_result_unreadable', `line ${line} of bulk operation ${state.bulkOperationId}'s result is not JSON`);
      }
      if (object.__parentId === undefined) {
        // A whole object ends where the next one starts: the batch is complete up to here.
        if (batch.length >= batchSize) await flush(position);
        batch.push({ object, children: [] });
      } else {
        const parent = batch.at(-1);
        if (!parent || parent.object.id !== object.__parentId) {
          throw new RuleViolationError('shopify_bulk_result_ungrouped', `line ${line} of bulk operation ${state.bulkOperationId}'s result does not follow its parent ${object.__parentId}`);
        }
        parent.children.push(object);
      }
      position = line;
    }
  } catch (err) {
    // The download broke off (what a batch's apply throws goes up as it is): a rerun goes on from the last batch.
    if (applying || err instanceof RuleViolationError) throw err;
    throw new ShopifyAdminError('unavailable', `the bulk operation's result stopped downloading: ${(err as Error).message}`);
  }
  await flush(position);
  return true;
}
