import { randomBytes } from 'node:crypto';
import { sql } from 'kysely';
import { z } from 'zod';
import type { DatabaseHandle, DB } from '../../db/database.js';
import type { CustomerRow } from '../../db/schema.js';
import { inTransaction, type Trx } from '../../db/transaction.js';
import { type Customer, customerInputSchema, translateUniqueViolation } from '../customers/index.js';
import { ConflictError, describeIssues, DomainError, type EventTopic, newId, recordEvents, safeParseInput } from '../kernel/index.js';
import { type Activity, MAX_BALANCE } from '../ledger/index.js';
import { linkReferee } from '../rewards/index.js';
import { getShop } from '../shops/index.js';

/** One row of a customers import: the customer, an optional absolute balance and the referrer. */
export const customerImportRowSchema = customerInputSchema.extend({
  points: z.number().int().min(0).max(MAX_BALANCE).nullish(),
  referredBy: z.string().trim().min(1).max(320).nullish(),
});
export type CustomerImportRow = z.output<typeof customerImportRowSchema>;

/** A record read from an import file with the line it starts on, or why that line could not be read. */
export type ImportRecord = { line: number; value: unknown } | { line: number; error: string };

export type ImportRejection = { line: number; error: string };

export type ImportResult = {
  /** Good lines: created + updated + unchanged. */
  imported: number;
  created: number;
  updated: number;
  unchanged: number;
  /** Balances the import changed, each with an `update_points` ledger entry. */
  balancesSet: number;
  /** The first `reportLimit` rejected lines, in line order; `rejectedCount` counts them all. */
  rejected: ImportRejection[];
  rejectedCount: number;
  /** Rows linked to their referrer by this import (a link that already existed does not count). */
  referralsLinked: number;
  /**
   * The first `reportLimit` imported rows whose referredBy was refused (unknown referrer, another
   * referrer, self-referral), in line order; `referralErrorCount` counts them all.
   */
  referralErrors: ImportRejection[];
  referralErrorCount: number;
};

export type ImportOptions = {
  /** Rows written per transaction. */
  batchSize?: number;
  /** Called after each batch with the number of records read so far. */
  onProgress?: (recordsRead: number) => void;
  /**
   * Rejected lines (and refused referrers) listed in the result; the rest are only counted, so a
   * file of a million bad lines costs no more memory than one of a thousand.
   */
  reportLimit?: number;
  /** Write each batch and roll it back: the result says what the import would change. */
  dryRun?: boolean;
};

/** Where the import runs: the database and whether it has a pool (PostgreSQL) or one session (PGlite). */
export type ImportDatabase = Pick<DatabaseHandle, 'db' | 'kind'>;

type Row = CustomerImportRow & { line: number };
/** A write of one batch: the customers, the ledger and the outbox, in one transaction. */
export type BatchOutcome = {
  created: number;
  updated: number;
  unchanged: number;
  balancesSet: number;
  rejected: ImportRejection[];
  /** Imported rows that name a referrer, linked once the whole file is in. */
  referrals: Array<{ line: number; shopifyCustomerId: string; referredBy: string }>;
  /** Customers placed in a tier (imports from other programs). */
  tiersPlaced: number;
  /** Imported rows whose tier was not placed, with why (the rest of the row is imported). */
  tierProblems: ImportRejection[];
};

const IMPORT_DESCRIPTION = 'Balance set by customers import';
export const DEFAULT_REPORT_LIMIT = 1000;

/**
 * Batches written at once on PostgreSQL: one commits while the next is written, on two pooled
 * connections besides the one holding the import's staging table (so the pool needs three).
 */
export const PARALLEL_BATCHES = 2;

/** PostgreSQL's deadlock_detected: two imports of overlapping files can lock rows in crossing orders. */
const DEADLOCK = '40P01';

/**
 * Upserts customers by shopifyCustomerId, `batchSize` rows per transaction, reading `records` as it
 * goes: memory holds a few batches, whatever the file's size. A bad record is rejected with its line
 * number and the rest go on; a committed batch stays committed even if a later one fails. A
 * shopifyCustomerId or e-mail that appears twice in the input is rejected the second time, wherever
 * the batch boundaries fall (this also keeps batches in flight at the same time off each other's
 * rows). The ids and e-mails already seen live in a temporary table of the import's session, not here.
 */
export async function importCustomers(
  database: ImportDatabase,
  shopId: string,
  records: AsyncIterable<ImportRecord>,
  options: ImportOptions = {},
): Promise<ImportResult> {
  const { db } = database;
  await getShop(db, shopId);
  return withStaging(database, async (staging) => {
    const { counts } = await streamBatches(database, staging, records, options, {
      validate: validateRecord,
      apply: (trx, rows) => applyBatch(trx, shopId, rows),
    });
    const referrals = await linkReferees(db, shopId, staging, options.reportLimit ?? DEFAULT_REPORT_LIMIT);
    return {
      ...counts,
      referralsLinked: referrals.linked,
      referralErrors: referrals.errors.listed,
      referralErrorCount: referrals.errors.count,
    };
  });
}

/** A row an import writes: its line, and the customer id and e-mail no other line of the file may repeat. */
export type ClaimedRow = { line: number; shopifyCustomerId: string; email: string };

/** What makes an import of customers: how a record becomes a row (or is refused), how a batch of rows is written. */
export type BatchWriter<R extends ClaimedRow> = {
  validate(record: ImportRecord): R | ImportRejection;
  /** Writes the rows in the caller's transaction; a unique violation makes the batch go again row by row. */
  apply(trx: Trx, rows: R[]): Promise<BatchOutcome>;
};

/**
 * Reads `records` and writes them `batchSize` rows per transaction (several at once on PostgreSQL):
 * the machinery every customers import shares. Memory holds a few batches, whatever the file's size.
 * A line repeating an earlier one's id or e-mail is refused, wherever the batch boundaries fall.
 * With `dryRun` each batch is written and rolled back: the counts are what the import would do.
 */
export async function streamBatches<R extends ClaimedRow>(
  database: ImportDatabase,
  staging: Staging,
  records: AsyncIterable<ImportRecord>,
  options: ImportOptions,
  writer: BatchWriter<R>,
): Promise<{ counts: BatchCounts; tiersPlaced: number; tierProblems: Report }> {
  const { db } = database;
  const batchSize = options.batchSize ?? 1000;
  const rejected = new Report(options.reportLimit ?? DEFAULT_REPORT_LIMIT);
  const tierProblems = new Report(rejected.limit);
  const total = emptyOutcome();
  // Batches written and not yet accounted for, oldest first; each carries the lines refused
  // before the write so the report stays in line order.
  const inFlight: Array<{ written: Promise<BatchOutcome>; refused: ImportRejection[] }> = [];
  const writers = database.kind === 'postgres' ? PARALLEL_BATCHES : 1;
  let rows: R[] = [];
  let refused: ImportRejection[] = [];
  let read = 0;

  const settleOldest = async () => {
    const batch = inFlight.shift()!;
    const outcome = await batch.written;
    total.created += outcome.created;
    total.updated += outcome.updated;
    total.unchanged += outcome.unchanged;
    total.balancesSet += outcome.balancesSet;
    total.tiersPlaced += outcome.tiersPlaced;
    rejected.addAll([...batch.refused, ...outcome.rejected]);
    tierProblems.addAll(outcome.tierProblems);
    await staging.addReferrals(outcome.referrals);
    options.onProgress?.(read);
  };
  const flush = async () => {
    if (rows.length === 0 && refused.length === 0) return;
    const batch = rows;
    const repeats = await staging.claim(batch);
    const fresh = batch.filter((row) => !repeats.has(row.line));
    const written = fresh.length ? writeBatch(database, fresh, writer.apply, options.dryRun === true) : Promise.resolve(emptyOutcome());
    written.catch(() => {}); // awaited in settleOldest; this only stops an early failure counting as unhandled
    inFlight.push({ written, refused: [...refused, ...repeats.values()] });
    rows = [];
    refused = [];
    // Back-pressure: the file is read no further than one batch past those being written.
    if (inFlight.length >= writers) await settleOldest();
  };

  try {
    for await (const record of records) {
      read++;
      const row = writer.validate(record);
      if ('error' in row) refused.push(row);
      else rows.push(row);
      // Refused lines count towards the batch too, so a file of bad lines is reported as it goes.
      if (rows.length + refused.length >= batchSize) await flush();
    }
    await flush();
    while (inFlight.length) await settleOldest();
    if (database.kind === 'postgres' && options.dryRun !== true) await flushCommits(db);
  } finally {
    // Let every batch in flight finish (or fail) before returning, so nothing runs on after an error.
    await Promise.allSettled(inFlight.map((b) => b.written));
  }
  options.onProgress?.(read);
  const counts = {
    imported: total.created + total.updated + total.unchanged,
    created: total.created,
    updated: total.updated,
    unchanged: total.unchanged,
    balancesSet: total.balancesSet,
    rejected: rejected.listed,
    rejectedCount: rejected.count,
  };
  return { counts, tiersPlaced: total.tiersPlaced, tierProblems };
}

/** What every customers import reports: its good lines, and the lines it refused (the first `reportLimit` listed). */
export type BatchCounts = Pick<ImportResult, 'imported' | 'created' | 'updated' | 'unchanged' | 'balancesSet' | 'rejected' | 'rejectedCount'>;

/** The first `limit` problems, added in line order, and how many there were in all. */
export class Report {
  readonly listed: ImportRejection[] = [];
  count = 0;
  constructor(readonly limit: number) {}

  addAll(problems: ImportRejection[]): void {
    problems.sort((a, b) => a.line - b.line);
    for (const p of problems) {
      this.count++;
      if (this.listed.length < this.limit) this.listed.push(p);
    }
  }
}

/** The import's own temporary tables: the lines it has taken (by id and e-mail), and the referrals to link. */
export type Staging = {
  /** Records the rows' ids and e-mails; returns the rows that repeat an earlier line, with why. */
  claim(rows: ClaimedRow[]): Promise<Map<number, ImportRejection>>;
  addReferrals(referrals: BatchOutcome['referrals']): Promise<void>;
  /** Up to `limit` referrals after line `after`, in line order. */
  referrals(after: number, limit: number): Promise<BatchOutcome['referrals']>;
};

/**
 * Runs `fn` with staging tables that live as long as the import. Temporary tables belong to one
 * session: on PostgreSQL the import holds one pooled connection for them (and writes on others);
 * PGlite has a single session, shared by every query.
 */
export async function withStaging<T>(database: ImportDatabase, fn: (staging: Staging) => Promise<T>): Promise<T> {
  const run = async (session: DB) => {
    const suffix = randomBytes(6).toString('hex');
    const lines = sql.table(`import_lines_${suffix}`);
    const referrals = sql.table(`import_referrals_${suffix}`);
    await sql`create temporary table ${lines} (
      line integer not null, shopify_customer_id text not null unique, email text not null unique)`.execute(session);
    await sql`create temporary table ${referrals} (
      line integer primary key, shopify_customer_id text not null, referred_by text not null)`.execute(session);
    try {
      return await fn({
        async claim(rows) {
          const repeats = new Map<number, ImportRejection>();
          if (rows.length === 0) return repeats;
          const input = sql`unnest(${rows.map((r) => r.line)}::int[], ${rows.map((r) => r.shopifyCustomerId)}::text[],
            ${rows.map((r) => r.email.toLowerCase())}::text[]) as input(line, shopify_customer_id, email)`;
          // In line order, so of two equal rows in one batch the first is taken.
          const taken = await sql<{ line: number }>`
            insert into ${lines} (line, shopify_customer_id, email)
            select line, shopify_customer_id, email from ${input} order by line
            on conflict do nothing returning line`.execute(session);
          if (taken.rows.length === rows.length) return repeats;
          const takenLines = new Set(taken.rows.map((r) => r.line));
          const repeated = rows.filter((r) => !takenLines.has(r.line));
          const earlier = await sql<{ line: number; id_line: number | null; email_line: number | null }>`
            select input.line,
              (select l.line from ${lines} l where l.shopify_customer_id = input.shopify_customer_id) as id_line,
              (select l.line from ${lines} l where l.email = input.email) as email_line
            from unnest(${repeated.map((r) => r.line)}::int[], ${repeated.map((r) => r.shopifyCustomerId)}::text[],
              ${repeated.map((r) => r.email.toLowerCase())}::text[]) as input(line, shopify_customer_id, email)`.execute(session);
          const byLine = new Map(earlier.rows.map((r) => [r.line, r]));
          for (const row of repeated) {
            const { id_line, email_line } = byLine.get(row.line)!;
            // A line without an id of its own is keyed by its e-mail (the imports from other programs).
            const error =
              id_line !== null && row.shopifyCustomerId !== row.email.toLowerCase()
                ? `shopifyCustomerId "${row.shopifyCustomerId}" repeats line ${id_line}`
                : `e-mail ${row.email} is also on line ${email_line ?? id_line}`;
            repeats.set(row.line, { line: row.line, error });
          }
          return repeats;
        },
        async addReferrals(pending) {
          if (pending.length === 0) return;
          await sql`
            insert into ${referrals} (line, shopify_customer_id, referred_by)
            select * from unnest(${pending.map((p) => p.line)}::int[], ${pending.map((p) => p.shopifyCustomerId)}::text[],
              ${pending.map((p) => p.referredBy)}::text[])`.execute(session);
        },
        async referrals(after, limit) {
          const { rows } = await sql<{ line: number; shopify_customer_id: string; referred_by: string }>`
            select line, shopify_customer_id, referred_by from ${referrals}
            where line > ${after} order by line limit ${limit}`.execute(session);
          return rows.map((r) => ({ line: r.line, shopifyCustomerId: r.shopify_customer_id, referredBy: r.referred_by }));
        },
      });
    } finally {
      // After a lost connection this fails too, and the session's end has dropped them: keep the first error.
      await sql`drop table if exists ${lines}, ${referrals}`.execute(session).catch(() => {});
    }
  };
  return database.kind === 'postgres' ? database.db.connection().execute(run) : run(database.db);
}

/** Links the rows that name a referrer, one at a time in line order, the way a referral sign-up does. */
async function linkReferees(db: DB, shopId: string, staging: Staging, reportLimit: number) {
  let linked = 0;
  const errors = new Report(reportLimit);
  for (let after = 0; ; ) {
    const page = await staging.referrals(after, 1000);
    if (page.length === 0) break;
    const refused: ImportRejection[] = [];
    for (const { line, shopifyCustomerId, referredBy } of page) {
      try {
        if ((await linkReferee(db, shopId, shopifyCustomerId, referredBy)).created) linked++;
      } catch (err) {
        if (!(err instanceof DomainError)) throw err;
        refused.push({ line, error: `referredBy: ${err.message}` });
      }
    }
    errors.addAll(refused);
    after = page[page.length - 1]!.line;
  }
  return { linked, errors };
}

function validateRecord(record: ImportRecord): Row | ImportRejection {
  if ('error' in record) return record;
  const parsed = safeParseInput(customerImportRowSchema, record.value);
  if (!parsed.success) return { line: record.line, error: describeIssues(parsed.error.issues) };
  return { ...parsed.data, line: record.line };
}

/** Thrown when a customer this batch meant to create was created concurrently; the batch is retried. */
class CreatedConcurrently extends Error {}

/** Ends a dry run's transaction, carrying what it would have written. */
class RolledBack extends Error {
  constructor(readonly outcome: BatchOutcome) {
    super('dry run');
  }
}

/**
 * Writes one batch in one transaction. A unique violation on the e-mail means another writer took
 * an e-mail after the batch checked it; the batch then goes row by row so only that line is rejected.
 */
async function writeBatch<R extends ClaimedRow>(database: ImportDatabase, rows: R[], apply: BatchWriter<R>['apply'], dryRun: boolean): Promise<BatchOutcome> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await inTransaction(database.db, async (trx) => {
        // A batch's commit need not wait for the disk: flushCommits waits once, after the last
        // batch, before the import says it is done. A server crash before that loses only batches
        // no one was told of, which a re-run of the (idempotent) import writes again.
        if (database.kind === 'postgres') await sql`set local synchronous_commit = off`.execute(trx);
        const outcome = await apply(trx, rows);
        if (dryRun) throw new RolledBack(outcome);
        return outcome;
      });
    } catch (err) {
      if (err instanceof RolledBack) return err.outcome;
      const retryable = err instanceof CreatedConcurrently || (err as { code?: string }).code === DEADLOCK;
      if (retryable && attempt < 3) continue;
      const conflict = translateUniqueViolation(err);
      if (!(conflict instanceof ConflictError)) throw err;
      if (rows.length === 1) return { ...emptyOutcome(), rejected: [{ line: rows[0]!.line, error: conflict.message }] };
      const outcome = emptyOutcome();
      for (const row of rows) addOutcome(outcome, await writeBatch(database, [row], apply, dryRun));
      return outcome;
    }
  }
}

/**
 * Waits until every batch committed without waiting for the disk is on it: a transaction with an id
 * commits by flushing the write-ahead log up to its own record, and so every earlier commit too.
 */
async function flushCommits(db: DB): Promise<void> {
  await inTransaction(db, (trx) => sql`select txid_current()`.execute(trx));
}

/**
 * The batch's customers as they are now (locked, so the ledger's oldPoints are exact) and who owns
 * each of its e-mails. Each row is looked up on its own in a unique index: a lookup of the whole
 * batch at once (`in (…)`) was planned as a scan of every customer of the shop whenever the
 * statistics predated the import, which made each batch slower than the last.
 */
type NullableRow = { [K in keyof CustomerRow]: CustomerRow[K] | null };

async function lookUp(trx: Trx, shopId: string, rows: Row[]) {
  const { rows: found } = await sql<NullableRow & { email_owner: string | null }>`
    select c.*,
      (select o.shopify_customer_id from customers o where o.shop_id = ${shopId} and lower(o.email) = input.email) as email_owner
    from unnest(${rows.map((r) => r.shopifyCustomerId)}::text[], ${rows.map((r) => r.email.toLowerCase())}::text[])
      with ordinality as input(shopify_customer_id, email, n)
    left join lateral (
      select * from customers c where c.shop_id = ${shopId} and c.shopify_customer_id = input.shopify_customer_id
      limit 1 for update
    ) c on true
    order by input.n`.execute(trx);
  return found;
}

async function applyBatch(trx: Trx, shopId: string, rows: Row[]): Promise<BatchOutcome> {
  const outcome = emptyOutcome();
  // Customers are locked and written in a fixed order (by id), so two imports sharing some lock them
  // in the same order; the ledger and the events keep the file's order.
  const byId = (a: { shopifyCustomerId: string }, b: { shopifyCustomerId: string }) =>
    a.shopifyCustomerId < b.shopifyCustomerId ? -1 : a.shopifyCustomerId > b.shopifyCustomerId ? 1 : 0;
  const sorted = [...rows].sort(byId);
  const found = new Map((await lookUp(trx, shopId, sorted)).map((row, i) => [sorted[i]!.shopifyCustomerId, row]));

  const now = new Date();
  // Each customer to insert or change, as it will be after this batch.
  const writes: Array<{ before: CustomerRow | undefined; after: Customer }> = [];
  for (const row of rows) {
    const { email_owner: owner, ...current } = found.get(row.shopifyCustomerId)!;
    if (owner !== null && owner !== row.shopifyCustomerId) {
      outcome.rejected.push({ line: row.line, error: `e-mail ${row.email} belongs to customer "${owner}"` });
      continue;
    }
    const before = current.id === null ? undefined : (current as CustomerRow);
    const after: Customer = {
      _id: before?.id ?? newId(),
      shopifyCustomerId: row.shopifyCustomerId,
      email: row.email,
      // An absent birthday or balance keeps the current one; an explicit null clears the birthday.
      birthday: row.birthday === undefined ? (before?.birthday ?? null) : row.birthday,
      points: row.points ?? before?.points ?? 0,
      pendingPoints: before?.pending_points ?? 0,
      createdAt: before?.created_at ?? now,
      updatedAt: now,
    };
    if (row.referredBy) {
      outcome.referrals.push({ line: row.line, shopifyCustomerId: row.shopifyCustomerId, referredBy: row.referredBy });
    }
    if (before && before.email === after.email && before.birthday === after.birthday && before.points === after.points) {
      outcome.unchanged++;
    } else {
      writes.push({ before, after });
    }
  }
  if (writes.length === 0) return outcome;

  // One statement for the batch, its rows passed as arrays: the statement's size does not grow with it.
  const customers = writes.map((w) => w.after).sort(byId);
  const saved = await trx
    .insertInto('customers')
    .columns(['id', 'shop_id', 'shopify_customer_id', 'email', 'birthday', 'points', 'created_at', 'updated_at'])
    .expression(
      sql`select id, ${shopId}, shopify_customer_id, email, birthday::date, points::bigint, ${now}::timestamptz, ${now}::timestamptz
        from unnest(${customers.map((c) => c._id)}::text[], ${customers.map((c) => c.shopifyCustomerId)}::text[],
          ${customers.map((c) => c.email)}::text[], ${customers.map((c) => c.birthday)}::text[],
          ${customers.map((c) => String(c.points))}::text[]) as input(id, shopify_customer_id, email, birthday, points)`,
    )
    .onConflict((oc) =>
      oc.columns(['shop_id', 'shopify_customer_id']).doUpdateSet((eb) => ({
        email: eb.ref('excluded.email'),
        birthday: eb.ref('excluded.birthday'),
        points: eb.ref('excluded.points'),
        updated_at: eb.ref('excluded.updated_at'),
      })),
    )
    .returning(['id', 'shopify_customer_id'])
    .execute();
  // A row meant to be new that came back with another id existed after all: someone created it
  // between the lock and the insert, so its old balance is unknown here. Retry the batch.
  const savedId = new Map(saved.map((row) => [row.shopify_customer_id, row.id]));
  if (writes.some((w) => !w.before && savedId.get(w.after.shopifyCustomerId) !== w.after._id)) {
    throw new CreatedConcurrently();
  }

  const activities = new Map<string, Activity>();
  for (const { before, after } of writes) {
    const oldPoints = before?.points ?? 0;
    if (oldPoints === after.points) continue;
    activities.set(after._id, {
      _id: newId(),
      type: 'update_points',
      settingType: 'import',
      description: IMPORT_DESCRIPTION,
      note: null,
      oldPoints,
      newPoints: after.points,
      customer: after._id,
      shop: shopId,
      createdAt: now,
      updatedAt: now,
    });
  }
  if (activities.size > 0) {
    const entries = [...activities.values()];
    await trx
      .insertInto('activities')
      .columns(['id', 'shop_id', 'customer_id', 'type', 'setting_type', 'description', 'note', 'old_points', 'new_points', 'created_at', 'updated_at'])
      .expression(
        sql`select id, ${shopId}, customer_id, 'update_points', 'import', ${IMPORT_DESCRIPTION}, null, old_points::bigint, new_points::bigint,
            ${now}::timestamptz, ${now}::timestamptz
          from unnest(${entries.map((a) => a._id)}::text[], ${entries.map((a) => a.customer)}::text[],
            ${entries.map((a) => String(a.oldPoints))}::text[], ${entries.map((a) => String(a.newPoints))}::text[])
            as input(id, customer_id, old_points, new_points)`,
      )
      .execute();
  }

  const events: Array<{ type: EventTopic; data: unknown }> = [];
  for (const { before, after } of writes) {
    if (!before) {
      outcome.created++;
      events.push({ type: 'customers/created', data: after });
    } else {
      outcome.updated++;
      if (before.email !== after.email || before.birthday !== after.birthday) {
        events.push({ type: 'customers/updated', data: after });
      }
    }
    const activity = activities.get(after._id);
    if (activity) events.push({ type: 'points/updated', data: activity });
  }
  outcome.balancesSet = activities.size;
  await recordEvents(trx, shopId, events);
  return outcome;
}

export function emptyOutcome(): BatchOutcome {
  return { created: 0, updated: 0, unchanged: 0, balancesSet: 0, rejected: [], referrals: [], tiersPlaced: 0, tierProblems: [] };
}

function addOutcome(total: BatchOutcome, part: BatchOutcome): void {
  total.created += part.created;
  total.updated += part.updated;
  total.unchanged += part.unchanged;
  total.balancesSet += part.balancesSet;
  total.tiersPlaced += part.tiersPlaced;
  for (const r of part.rejected) total.rejected.push(r);
  for (const t of part.tierProblems) total.tierProblems.push(t);
  for (const p of part.referrals) total.referrals.push(p);
}
