import { type Insertable, sql } from 'kysely';
import { z } from 'zod';
import type { DB } from '../db/database.js';
import type { CustomerRow, CustomersTable } from '../db/schema.js';
import { inTransaction, type Trx } from '../db/transaction.js';
import { customerInputSchema, toCustomer, translateUniqueViolation } from './customers.js';
import { ConflictError } from './errors.js';
import { type EventTopic, recordEvents } from './events.js';
import { newId } from './ids.js';
import { type Activity, MAX_BALANCE, toActivity } from './points.js';
import { getShop } from './shops.js';
import { validationErrorFrom } from './validation.js';

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
};

export type ImportOptions = {
  /** Rows written per transaction. */
  batchSize?: number;
  /** Called after each batch with the number of records read so far. */
  onProgress?: (recordsRead: number) => void;
};

type Row = CustomerImportRow & { line: number };
type BatchOutcome = Omit<ImportResult, 'imported'>;

const IMPORT_DESCRIPTION = 'Balance set by customers import';

/**
 * Upserts customers by shopifyCustomerId, `batchSize` rows per transaction. A bad record is
 * rejected with its line number and the rest go on; a committed batch stays committed even if a
 * later one fails. A shopifyCustomerId that appears twice in the input is rejected the second
 * time, wherever the batch boundaries fall.
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
  const firstLineOf = new Map<string, number>();
  let batch: Row[] = [];
  let read = 0;

  const flush = async () => {
    if (batch.length === 0) return;
    const rows = batch;
    batch = [];
    addOutcome(total, await writeBatch(db, shopId, rows));
    options.onProgress?.(read);
  };

  for await (const record of records) {
    read++;
    const row = validateRecord(record);
    if ('error' in row) {
      total.rejected.push(row);
      continue;
    }
    const first = firstLineOf.get(row.shopifyCustomerId);
    if (first !== undefined) {
      total.rejected.push({ line: row.line, error: `shopifyCustomerId "${row.shopifyCustomerId}" repeats line ${first}` });
      continue;
    }
    firstLineOf.set(row.shopifyCustomerId, row.line);
    batch.push(row);
    if (batch.length >= batchSize) await flush();
  }
  await flush();
  options.onProgress?.(read);

  total.rejected.sort((a, b) => a.line - b.line);
  return { imported: total.created + total.updated + total.unchanged, ...total };
}

function validateRecord(record: ImportRecord): Row | ImportRejection {
  if ('error' in record) return record;
  const parsed = customerImportRowSchema.safeParse(record.value);
  if (!parsed.success) return { line: record.line, error: validationErrorFrom(parsed.error.issues).message };
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

  // An e-mail belongs to the first line of the batch that names it (e-mails are case-insensitive).
  const lineOfEmail = new Map<string, number>();
  const candidates: Row[] = [];
  for (const row of rows) {
    const email = row.email.toLowerCase();
    const first = lineOfEmail.get(email);
    if (first !== undefined) {
      outcome.rejected.push({ line: row.line, error: `e-mail ${row.email} is also on line ${first}` });
    } else {
      lineOfEmail.set(email, row.line);
      candidates.push(row);
    }
  }
  if (candidates.length === 0) return outcome;

  // Lock the customers being updated, in a fixed order, so the ledger's oldPoints are exact.
  const existing = new Map(
    (
      await trx
        .selectFrom('customers')
        .selectAll()
        .where('shop_id', '=', shopId)
        .where('shopify_customer_id', 'in', candidates.map((r) => r.shopifyCustomerId))
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
        .where((eb) => eb(eb.fn('lower', ['email']), 'in', [...lineOfEmail.keys()]))
        .execute()
    ).map((row) => [row.email, row.shopify_customer_id]),
  );

  const now = new Date();
  const writes: Array<{ row: Row; before: CustomerRow | undefined; points: number; values: Insertable<CustomersTable> }> = [];
  const accepted: Array<{ row: Row; customerId: string }> = [];
  for (const row of candidates) {
    const owner = emailOwners.get(row.email.toLowerCase());
    if (owner !== undefined && owner !== row.shopifyCustomerId) {
      outcome.rejected.push({ line: row.line, error: `e-mail ${row.email} belongs to customer "${owner}"` });
      continue;
    }
    const before = existing.get(row.shopifyCustomerId);
    // An absent birthday or balance keeps the current one; an explicit null clears the birthday.
    const birthday = row.birthday === undefined ? (before?.birthday ?? null) : row.birthday;
    const points = row.points ?? before?.points ?? 0;
    const id = before?.id ?? newId();
    accepted.push({ row, customerId: id });
    if (before && before.email === row.email && before.birthday === birthday && before.points === points) {
      outcome.unchanged++;
      continue;
    }
    writes.push({
      row,
      before,
      points,
      values: {
        id,
        shop_id: shopId,
        shopify_customer_id: row.shopifyCustomerId,
        email: row.email,
        birthday,
        points,
        created_at: now,
        updated_at: now,
      },
    });
  }

  for (const { row, customerId } of accepted) {
    if (row.referredBy) {
      outcome.pendingReferrals.push({
        line: row.line,
        customerId,
        shopifyCustomerId: row.shopifyCustomerId,
        referredBy: row.referredBy,
      });
    }
  }
  if (writes.length === 0) return outcome;

  const saved = new Map(
    (
      await trx
        .insertInto('customers')
        .values(writes.map((w) => w.values))
        .onConflict((oc) =>
          oc.columns(['shop_id', 'shopify_customer_id']).doUpdateSet((eb) => ({
            email: eb.ref('excluded.email'),
            birthday: eb.ref('excluded.birthday'),
            points: eb.ref('excluded.points'),
            updated_at: eb.ref('excluded.updated_at'),
          })),
        )
        .returningAll()
        .execute()
    ).map((row) => [row.shopify_customer_id, row]),
  );
  for (const w of writes) {
    // A row meant to be new that came back with another id existed after all: someone created it
    // between the lock and the insert, so its old balance is unknown here. Retry the batch.
    if (!w.before && saved.get(w.row.shopifyCustomerId)?.id !== w.values.id) throw new CreatedConcurrently();
  }

  const activities = new Map<string, Activity>();
  const balanceChanges = writes.filter((w) => (w.before?.points ?? 0) !== w.points);
  if (balanceChanges.length > 0) {
    const rows = await trx
      .insertInto('activities')
      .values(
        balanceChanges.map((w) => ({
          id: newId(),
          shop_id: shopId,
          customer_id: w.values.id,
          type: 'update_points',
          setting_type: 'import',
          description: IMPORT_DESCRIPTION,
          note: null,
          old_points: w.before?.points ?? 0,
          new_points: w.points,
          created_at: now,
          updated_at: now,
        })),
      )
      .returningAll()
      .execute();
    for (const row of rows) activities.set(row.customer_id, toActivity(row));
  }

  const events: Array<{ type: EventTopic; data: unknown }> = [];
  for (const w of writes) {
    const customer = toCustomer(saved.get(w.row.shopifyCustomerId)!);
    if (!w.before) {
      outcome.created++;
      events.push({ type: 'customers/created', data: customer });
    } else {
      outcome.updated++;
      if (w.before.email !== customer.email || w.before.birthday !== customer.birthday) {
        events.push({ type: 'customers/updated', data: customer });
      }
    }
    const activity = activities.get(customer._id);
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
