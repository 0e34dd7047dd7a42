import { sql } from 'kysely';
import { z } from 'zod';
import type { CustomerRow } from '../../db/schema.js';
import type { Trx } from '../../db/transaction.js';
import type { Customer } from '../customers/index.js';
import { describeIssues, type EventTopic, newId, recordEvents, safeParseInput } from '../kernel/index.js';
import { MAX_BALANCE } from '../ledger/index.js';
import { placeTiers, shareTiersByName } from '../program/index.js';
import { getShop } from '../shops/index.js';
import {
  type BatchOutcome, emptyOutcome, type ImportDatabase, type ImportOptions, type ImportRecord, type ImportRejection,
  streamBatches, withStaging,
} from './customers-import.js';

/** The programs whose customer exports we read, and how their entries name themselves in our ledger. */
export const PEER_SOURCES = {
  smile: { label: 'Smile.io' },
  loyaltylion: { label: 'LoyaltyLion' },
} as const;
export type PeerSource = keyof typeof PEER_SOURCES;

/**
 * One customer of a peer's export, in our names (the CLI maps each program's columns onto them).
 * `points` is the spendable balance (Smile's points_balance, LoyaltyLion's points_approved); spent
 * and pending points are history there, kept in the ledger entry's note, never a balance here.
 */
const peerRowSchema = z.object({
  email: z.email().max(320),
  /** The shop's own customer id (LoyaltyLion's merchant_id); Smile's export has none. */
  customerId: z.string().trim().min(1).max(64).optional(),
  points: z.number().int().min(0).max(MAX_BALANCE),
  pointsSpent: z.number().int().min(0).optional(),
  pointsPending: z.number().int().min(0).optional(),
  birthday: z.string().trim().optional(),
  tier: z.string().trim().min(1).max(200).optional(),
  // Read so a file that has it is accepted; their links point at the peer's servers, not ours.
  referralUrl: z.string().optional(),
});

type PeerRow = {
  line: number;
  /** The key no other line may repeat, and a new customer's id: the shop's id when given, else the e-mail. */
  shopifyCustomerId: string;
  email: string;
  givenId: boolean;
  points: number;
  note: string | null;
  birthday: string | undefined;
  tier: string | undefined;
};

export type PeerImportResult = {
  /** Good lines: created + updated + unchanged. */
  imported: number;
  created: number;
  updated: number;
  unchanged: number;
  /** Balances set, each by one ledger entry naming the source. */
  balancesSet: number;
  /** Customers placed in their tier (an override until `tierUntil`). */
  tiersPlaced: number;
  rejected: ImportRejection[];
  rejectedCount: number;
  /** Imported rows whose tier the shop lacks (not placed, not created); the first `reportLimit`. */
  tierProblems: ImportRejection[];
  tierProblemCount: number;
  dryRun: boolean;
};

/**
 * Customers from another program's export (docs/operations.md "Moving in from Smile.io or
 * LoyaltyLion"): matched by e-mail or created, each one's balance set once by one ledger entry
 * "Imported from <program>" (the mark a re-run finds: a customer the source was imported for is not
 * set again, and a file whose balance differs from the one imported is refused on that line),
 * birthdays set, and tiers placed by name as overrides until `tierUntil`, not re-earned: the entry
 * is an update_points, which no tier metric counts. Streams in batches as the customers import
 * does (streamBatches), so memory stays flat.
 */
export async function importPeerCustomers(
  database: ImportDatabase,
  shopId: string,
  source: PeerSource,
  records: AsyncIterable<ImportRecord>,
  options: ImportOptions & { tierUntil: Date },
): Promise<PeerImportResult> {
  await getShop(database.db, shopId);
  const label = PEER_SOURCES[source].label;
  const description = `Imported from ${label}`;
  return withStaging(database, async (staging) => {
    const { counts, tiersPlaced, tierProblems } = await streamBatches(database, staging, records, options, {
      validate: (record) => validatePeerRecord(record, label),
      apply: (trx, rows) => applyPeerBatch(trx, shopId, rows, { description, until: options.tierUntil }),
    });
    return {
      ...counts,
      tiersPlaced,
      tierProblems: tierProblems.listed,
      tierProblemCount: tierProblems.count,
      dryRun: options.dryRun === true,
    };
  });
}

function validatePeerRecord(record: ImportRecord, label: string): PeerRow | ImportRejection {
  if ('error' in record) return record;
  const parsed = safeParseInput(peerRowSchema, record.value);
  if (!parsed.success) return { line: record.line, error: describeIssues(parsed.error.issues) };
  const { email, customerId, points, pointsSpent, pointsPending, tier } = parsed.data;
  const birthday = parsed.data.birthday ? peerBirthday(parsed.data.birthday) : undefined;
  if (birthday === null) return { line: record.line, error: `birthday: "${parsed.data.birthday}" is not a date (YYYY-MM-DD, or MM-DD without a year)` };
  const key = customerId ?? email.toLowerCase();
  if (key.length > 64) return { line: record.line, error: 'email: longer than 64 characters, and the line has no customer id to create the customer with' };
  const history = [
    pointsSpent !== undefined ? `${pointsSpent} spent` : undefined,
    pointsPending !== undefined ? `${pointsPending} pending` : undefined,
  ].filter(Boolean);
  return {
    line: record.line,
    shopifyCustomerId: key,
    email,
    givenId: customerId !== undefined,
    points,
    note: history.length ? `${label}: ${history.join(', ')} points there` : null,
    birthday,
    tier,
  };
}

/**
 * A birthday as the peers write it: YYYY-MM-DD (Smile writes the year 1004 when only the day is
 * known, and it is kept: our birthdays are read by month and day), or MM-DD, given that same year.
 * Null when it is no date of the calendar.
 */
function peerBirthday(text: string): string | null {
  const day = /^\d{4}-\d{2}-\d{2}$/.test(text) ? text : /^-{0,2}\d{2}-\d{2}$/.test(text) ? `1004-${text.replace(/^-+/, '')}` : undefined;
  if (!day) return null;
  const date = new Date(`${day}T00:00:00Z`);
  return !Number.isNaN(date.getTime()) && date.toISOString().slice(0, 10) === day ? day : null;
}

type Found = {
  customer: CustomerRow | null;
  /** The balance the source's entry set, when the source was imported for this customer before. */
  imported: number | null;
  /** The e-mail of the customer the line's customer id names, when one does. */
  idOwnerEmail: string | null;
};

/**
 * The batch's customers by e-mail, locked, in the batch's order (sorted by e-mail: two imports
 * lock shared customers in the same order), with the source's earlier entry and who holds each
 * line's customer id. One index probe each, as the customers import looks up.
 */
async function lookUpPeers(trx: Trx, shopId: string, rows: PeerRow[], description: string): Promise<Found[]> {
  const { rows: found } = await sql<{ [K in keyof CustomerRow]: CustomerRow[K] | null } & { imported: string | null; id_owner_email: string | null }>`
    select c.*, prior.new_points as imported,
      (select o.email from customers o where o.shop_id = ${shopId} and o.shopify_customer_id = input.customer_id) as id_owner_email
    from unnest(${rows.map((r) => r.email.toLowerCase())}::text[], ${rows.map((r) => r.shopifyCustomerId)}::text[])
      with ordinality as input(email, customer_id, n)
    left join lateral (
      select * from customers c where c.shop_id = ${shopId} and lower(c.email) = input.email limit 1 for update
    ) c on true
    left join lateral (
      select a.new_points from activities a
      where a.customer_id = c.id and a.type = 'update_points' and a.setting_type = 'import' and a.description = ${description}
      order by a.seq desc limit 1
    ) prior on true
    order by input.n`.execute(trx);
  return found.map(({ imported, id_owner_email, ...customer }) => ({
    customer: customer.id === null ? null : (customer as CustomerRow),
    imported: imported === null ? null : Number(imported),
    idOwnerEmail: id_owner_email,
  }));
}

async function applyPeerBatch(trx: Trx, shopId: string, rows: PeerRow[], source: { description: string; until: Date }): Promise<BatchOutcome> {
  const outcome = emptyOutcome();
  // The shop's row first (shared), as tier overrides take it, then the customers, then their tiers.
  const tiers = rows.some((r) => r.tier) ? await shareTiersByName(trx, shopId) : new Map<string, string>();
  const sorted = [...rows].sort((a, b) => (a.email.toLowerCase() < b.email.toLowerCase() ? -1 : a.email.toLowerCase() > b.email.toLowerCase() ? 1 : 0));
  const lookups = await lookUpPeers(trx, shopId, sorted, source.description);
  const found = new Map(sorted.map((row, i) => [row.line, lookups[i]!]));

  const now = new Date();
  const created: Customer[] = [];
  const updated: Array<{ before: CustomerRow; after: Customer }> = [];
  const entries: Array<{ id: string; customer: Customer; oldPoints: number; note: string | null }> = [];
  const placements: Array<{ customerId: string; tierId: string }> = [];
  for (const row of rows) {
    const { customer: before, imported, idOwnerEmail } = found.get(row.line)!;
    if (!before && idOwnerEmail !== null) {
      outcome.rejected.push({ line: row.line, error: `customer id "${row.shopifyCustomerId}" belongs to the customer ${idOwnerEmail}, not ${row.email}` });
      continue;
    }
    if (imported !== null && imported !== row.points) {
      outcome.rejected.push({
        line: row.line,
        error: `points: the balance was imported from this program before (${imported}); the file now says ${row.points}, which is not set again (adjust it with a points call)`,
      });
      continue;
    }
    const after: Customer = {
      _id: before?.id ?? newId(),
      shopifyCustomerId: before?.shopify_customer_id ?? row.shopifyCustomerId,
      email: before?.email ?? row.email,
      birthday: row.birthday ?? before?.birthday ?? null,
      // Set once: a customer the source was imported for keeps what they earned and spent here since.
      points: imported === null ? row.points : before!.points,
      pendingPoints: before?.pending_points ?? 0,
      createdAt: before?.created_at ?? now,
      updatedAt: now,
    };
    if (imported === null) entries.push({ id: newId(), customer: after, oldPoints: before?.points ?? 0, note: row.note });
    if (!before) created.push(after);
    else if (imported === null || after.birthday !== before.birthday) updated.push({ before, after });
    if (row.tier) {
      const tierId = tiers.get(row.tier.toLowerCase());
      if (tierId) placements.push({ customerId: after._id, tierId });
      else outcome.tierProblems.push({ line: row.line, error: `tier "${row.tier}": the shop has no tier of that name (not placed)` });
    }
  }

  if (created.length) {
    await trx
      .insertInto('customers')
      .columns(['id', 'shop_id', 'shopify_customer_id', 'email', 'birthday', 'points', 'created_at', 'updated_at'])
      .expression(
        sql`select id, ${shopId}, shopify_customer_id, email, birthday::date, points::bigint, ${now}::timestamptz, ${now}::timestamptz
          from unnest(${created.map((c) => c._id)}::text[], ${created.map((c) => c.shopifyCustomerId)}::text[],
            ${created.map((c) => c.email)}::text[], ${created.map((c) => c.birthday)}::text[],
            ${created.map((c) => String(c.points))}::text[]) as input(id, shopify_customer_id, email, birthday, points)
          order by id`,
      )
      .execute();
  }
  if (updated.length) {
    const changes = updated.map((u) => u.after).sort((a, b) => (a._id < b._id ? -1 : 1));
    await sql`
      update customers c set points = input.points::bigint, birthday = input.birthday::date, updated_at = ${now}::timestamptz
      from unnest(${changes.map((c) => c._id)}::text[], ${changes.map((c) => String(c.points))}::text[], ${changes.map((c) => c.birthday)}::text[])
        as input(id, points, birthday)
      where c.id = input.id`.execute(trx);
  }
  if (entries.length) {
    await trx
      .insertInto('activities')
      .columns(['id', 'shop_id', 'customer_id', 'type', 'setting_type', 'description', 'note', 'old_points', 'new_points', 'created_at', 'updated_at'])
      .expression(
        sql`select id, ${shopId}, customer_id, 'update_points', 'import', ${source.description}, note, old_points::bigint, new_points::bigint,
            ${now}::timestamptz, ${now}::timestamptz
          from unnest(${entries.map((e) => e.id)}::text[], ${entries.map((e) => e.customer._id)}::text[], ${entries.map((e) => e.note)}::text[],
            ${entries.map((e) => String(e.oldPoints))}::text[], ${entries.map((e) => String(e.customer.points))}::text[])
            as input(id, customer_id, note, old_points, new_points)`,
      )
      .execute();
  }
  outcome.tiersPlaced = await placeTiers(trx, shopId, placements, source.until, source.description, now);

  const events: Array<{ type: EventTopic; data: unknown }> = created.map((c) => ({ type: 'customers/created', data: c }));
  for (const { before, after } of updated) {
    if (before.birthday !== after.birthday) events.push({ type: 'customers/updated', data: after });
  }
  for (const e of entries) {
    if (e.oldPoints === e.customer.points) continue;
    events.push({
      type: 'points/updated',
      data: {
        _id: e.id, type: 'update_points', settingType: 'import', description: source.description, note: e.note,
        oldPoints: e.oldPoints, newPoints: e.customer.points, customer: e.customer._id, shop: shopId, createdAt: now, updatedAt: now,
      },
    });
  }
  await recordEvents(trx, shopId, events);

  outcome.created = created.length;
  outcome.updated = updated.length;
  outcome.unchanged = rows.length - outcome.rejected.length - created.length - updated.length;
  outcome.balancesSet = entries.length;
  return outcome;
}
