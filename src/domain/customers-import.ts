import { sql } from 'kysely';
import { z } from 'zod';
import type { DB } from '../db/database.js';
import type { CustomerRow } from '../db/schema.js';
import { inTransaction, type Trx } from '../db/transaction.js';
import { type Customer, customerInputSchema, translateUniqueViolation } from './customers.js';
import { ConflictError, DomainError } from './errors.js';
import { type EventTopic, recordEvents } from './events.js';
import { newId } from './ids.js';
import { type Activity, MAX_BALANCE } from './points.js';
import { linkReferee } from './referrals.js';
import { getShop } from './shops.js';
import { describeIssues, safeParseInput } from './validation.js';

/** One row of a customers import: the customer, an optional absolute balance and the referrer. */
export const customerImportRowSchema = customerInputSchema.extend({
  points: z.number().int().min(0).max(MAX_BALANCE).nullish(),
  referredBy: z.string().trim().min(1).max(320).nullish(),
});
export type CustomerImportRow = z.output<typeof customerImportRowSchema>;

/** A record read from an import file with the line it starts on, or why that line could not be read. */
export type ImportRecord = { line: number; value: unknown } | { line: number; error: string };

export type ImportRejection = { line: number; error: string };

/**
 * An imported row that names a referrer. Linking referees is the referral feature's job; it runs
 * after the whole file is in, since a referrer may appear further down the file than its referee.
 * `referredBy` is the referrer's referral code, shopifyCustomerId or e-mail.
 */
export type PendingReferral = { line: number; customerId: string; shopifyCustomerId: string; referredBy: string };

export type ImportResult = {
  /** Good lines: created + updated + unchanged. */
  imported: number;
  created: number;
  updated: number;
  unchanged: number;
  /** Balances the import changed, each with an `update_points` ledger entry. */
  balancesSet: number;
  rejected: ImportRejection[];
  pendingReferrals: PendingReferral[];
  /** Rows linked to their referrer by this import (a link that already existed does not count). */
  referralsLinked: number;
  /** Imported rows whose referredBy was refused (unknown referrer, another referrer, self-referral). */
  referralErrors: ImportRejection[];
};

export type ImportOptions = {
  /** Rows written per transaction. */
  batchSize?: number;
  /** Called after each batch with the number of records read so far. */
  onProgress?: (recordsRead: number) => void;
};

type Row = CustomerImportRow & { line: number };
type BatchOutcome = Omit<ImportResult, 'imported' | 'referralsLinked' | 'referralErrors'>;

const IMPORT_DESCRIPTION = 'Balance set by customers import';

/** Batches written at once: one writes while the next is prepared, on two connections. */
const PARALLEL_BATCHES = 2;

/**
 * Upserts customers by shopifyCustomerId, `batchSize` rows per transaction. A bad record is
 * rejected with its line number and the rest go on; a committed batch stays committed even if a
 * later one fails. A shopifyCustomerId or e-mail that appears twice in the input is rejected the
 * second time, wherever the batch boundaries fall (this also keeps batches in flight at the same
 * time off each other's rows).
 */
export async function importCustomers(
  db: DB,
  shopId: string,
  records: AsyncIterable<ImportRecord>,
  options: ImportOptions = {},
): Promise<ImportResult> {
  await getShop(db, shopId);
  const batchSize = options.batchSize ?? 1000;
  const total: BatchOutcome = emptyOutcome();
  const lineOfId = new Map<string, number>();
  const lineOfEmail = new Map<string, number>();
  const inFlight: Array<Promise<void>> = [];
  let batch: Row[] = [];
  let read = 0;

  const flush = async () => {
    if (batch.length === 0) return;
    const rows = batch;
    batch = [];
    const written = writeBatch(db, shopId, rows).then((outcome) => {
      addOutcome(total, outcome);
      options.onProgress?.(read);
    });
    written.catch(() => {}); // awaited below; this only stops an early failure counting as unhandled
    inFlight.push(written);
    if (inFlight.length >= PARALLEL_BATCHES) await inFlight.shift();
  };

  try {
    for await (const record of records) {
      read++;
      const row = validateRecord(record);
      if ('error' in row) {
        total.rejected.push(row);
        continue;
      }
      const email = row.email.toLowerCase();
      const sameId = lineOfId.get(row.shopifyCustomerId);
      const sameEmail = lineOfEmail.get(email);
      if (sameId !== undefined) {
        total.rejected.push({ line: row.line, error: `shopifyCustomerId "${row.shopifyCustomerId}" repeats line ${sameId}` });
      } else if (sameEmail !== undefined) {
        total.rejected.push({ line: row.line, error: `e-mail ${row.email} is also on line ${sameEmail}` });
      } else {
        lineOfId.set(row.shopifyCustomerId, row.line);
        lineOfEmail.set(email, row.line);
        batch.push(row);
        if (batch.length >= batchSize) await flush();
      }
    }
    await flush();
  } finally {
    // Let every batch in flight finish (or fail) before returning, so nothing runs on after an error.
    await Promise.allSettled(inFlight);
  }
  for (const written of inFlight) await written; // rethrows the first failure
  options.onProgress?.(read);

  total.rejected.sort((a, b) => a.line - b.line);
  const referrals = await linkReferees(db, shopId, total.pendingReferrals);
  return { imported: total.created + total.updated + total.unchanged, ...total, ...referrals };
}

/** Links the rows that name a referrer, one at a time, the way a referral sign-up does. */
async function linkReferees(db: DB, shopId: string, pending: PendingReferral[]) {
  let referralsLinked = 0;
  const referralErrors: ImportRejection[] = [];
  for (const { line, shopifyCustomerId, referredBy } of pending) {
    try {
      if ((await linkReferee(db, shopId, shopifyCustomerId, referredBy)).created) referralsLinked++;
    } catch (err) {
      if (!(err instanceof DomainError)) throw err;
      referralErrors.push({ line, error: `referredBy: ${err.message}` });
    }
  }
  return { referralsLinked, referralErrors };
}

function validateRecord(record: ImportRecord): Row | ImportRejection {
  if ('error' in record) return record;
  const parsed = safeParseInput(customerImportRowSchema, record.value);
  if (!parsed.success) return { line: record.line, error: describeIssues(parsed.error.issues) };
  return { ...parsed.data, line: record.line };
}

/** Thrown when a customer this batch meant to create was created concurrently; the batch is retried. */
class CreatedConcurrently extends Error {}

/**
 * Writes one batch in one transaction. A unique violation on the e-mail means another writer took
 * an e-mail after the batch checked it; the batch then goes row by row so only that line is rejected.
 */
async function writeBatch(db: DB, shopId: string, rows: Row[]): Promise<BatchOutcome> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await inTransaction(db, (trx) => applyBatch(trx, shopId, rows));
    } catch (err) {
      if (err instanceof CreatedConcurrently && attempt < 3) continue;
      const conflict = translateUniqueViolation(err);
      if (!(conflict instanceof ConflictError)) throw err;
      if (rows.length === 1) return { ...emptyOutcome(), rejected: [{ line: rows[0]!.line, error: conflict.message }] };
      const outcome = emptyOutcome();
      for (const row of rows) addOutcome(outcome, await writeBatch(db, shopId, [row]));
      return outcome;
    }
  }
}

async function applyBatch(trx: Trx, shopId: string, rows: Row[]): Promise<BatchOutcome> {
  const outcome = emptyOutcome();

  // Lock the customers being updated, in a fixed order, so the ledger's oldPoints are exact.
  const existing = new Map(
    (
      await trx
        .selectFrom('customers')
        .selectAll()
        .where('shop_id', '=', shopId)
        .where('shopify_customer_id', 'in', rows.map((r) => r.shopifyCustomerId))
        .orderBy('id')
        .forUpdate()
        .execute()
    ).map((row) => [row.shopify_customer_id, row]),
  );
  const emailOwners = new Map(
    (
      await trx
        .selectFrom('customers')
        .select(['shopify_customer_id', sql<string>`lower(email)`.as('email')])
        .where('shop_id', '=', shopId)
        .where((eb) => eb(eb.fn('lower', ['email']), 'in', rows.map((r) => r.email.toLowerCase())))
        .execute()
    ).map((row) => [row.email, row.shopify_customer_id]),
  );

  const now = new Date();
  // Each customer to insert or change, as it will be after this batch.
  const writes: Array<{ before: CustomerRow | undefined; after: Customer }> = [];
  for (const row of rows) {
    const owner = emailOwners.get(row.email.toLowerCase());
    if (owner !== undefined && owner !== row.shopifyCustomerId) {
      outcome.rejected.push({ line: row.line, error: `e-mail ${row.email} belongs to customer "${owner}"` });
      continue;
    }
    const before = existing.get(row.shopifyCustomerId);
    const after: Customer = {
      _id: before?.id ?? newId(),
      shopifyCustomerId: row.shopifyCustomerId,
      email: row.email,
      // An absent birthday or balance keeps the current one; an explicit null clears the birthday.
      birthday: row.birthday === undefined ? (before?.birthday ?? null) : row.birthday,
      points: row.points ?? before?.points ?? 0,
      createdAt: before?.created_at ?? now,
      updatedAt: now,
    };
    if (row.referredBy) {
      outcome.pendingReferrals.push({
        line: row.line,
        customerId: after._id,
        shopifyCustomerId: row.shopifyCustomerId,
        referredBy: row.referredBy,
      });
    }
    if (before && before.email === after.email && before.birthday === after.birthday && before.points === after.points) {
      outcome.unchanged++;
    } else {
      writes.push({ before, after });
    }
  }
  if (writes.length === 0) return outcome;

  const saved = await trx
    .insertInto('customers')
    .values(
      writes.map(({ after: c }) => ({
        id: c._id,
        shop_id: shopId,
        shopify_customer_id: c.shopifyCustomerId,
        email: c.email,
        birthday: c.birthday,
        points: c.points,
        created_at: c.createdAt,
        updated_at: c.updatedAt,
      })),
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
    await trx
      .insertInto('activities')
      .values(
        [...activities.values()].map((a) => ({
          id: a._id,
          shop_id: a.shop,
          customer_id: a.customer,
          type: a.type,
          setting_type: a.settingType,
          description: a.description,
          note: a.note,
          old_points: a.oldPoints,
          new_points: a.newPoints,
          created_at: a.createdAt,
          updated_at: a.updatedAt,
        })),
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

function emptyOutcome(): BatchOutcome {
  return { created: 0, updated: 0, unchanged: 0, balancesSet: 0, rejected: [], pendingReferrals: [] };
}

function addOutcome(total: BatchOutcome, part: BatchOutcome): void {
  total.created += part.created;
  total.updated += part.updated;
  total.unchanged += part.unchanged;
  total.balancesSet += part.balancesSet;
  for (const r of part.rejected) total.rejected.push(r);
  for (const p of part.pendingReferrals) total.pendingReferrals.push(p);
}
