import { z } from 'zod';
import type { Queryable } from '../../db/transaction.js';
import { parseInput } from '../kernel/index.js';
import { csvRecord } from './csv.js';
import { EXPORT_PAGE } from './customers-export.js';

// A date alone is that day's start in UTC; a date-time must say its offset.
const instant = z.union([z.iso.datetime({ offset: true }), z.iso.date()]).transform((text) => new Date(text));

/** ?from=&to=: the entries created at or after `from` and before `to`. */
export const ledgerRangeSchema = z
  .strictObject({ from: instant, to: instant })
  .refine((range) => range.from < range.to, { path: ['to'], message: 'must be after from' });
export type LedgerRange = z.output<typeof ledgerRangeSchema>;

export function parseLedgerRange(query: unknown): LedgerRange {
  return parseInput(ledgerRangeSchema, query);
}

/**
 * The ledger export's columns: Smile's points transaction names what it shares with ours
 * (id, customer_id, points_change, description, internal_note, created_at), LoyaltyLion's
 * customer record the customer's (merchant_id, email); the rest are this API's own activity fields.
 */
export const LEDGER_COLUMNS = [
  'id', 'created_at', 'customer_id', 'merchant_id', 'email', 'type', 'setting_type', 'points_change', 'old_points', 'new_points',
  'description', 'internal_note',
] as const;

/**
 * The shop's ledger entries created in the range as CSV, oldest first: keyset pages along the
 * shop's entries in seq order (activities_shop_seq_idx), the range a filter on them, so memory
 * holds one page. The customer's columns are empty for an entry whose customer was deleted.
 */
export async function* ledgerCsv(db: Queryable, shopId: string, range: LedgerRange, pageSize = EXPORT_PAGE): AsyncGenerator<string> {
  yield csvRecord(LEDGER_COLUMNS);
  let after = 0;
  for (;;) {
    const rows = await db
      .selectFrom('activities as a')
      .leftJoin('customers as c', 'c.id', 'a.customer_id')
      .select(['a.seq', 'a.id', 'a.created_at', 'a.customer_id', 'c.shopify_customer_id', 'c.email', 'a.type', 'a.setting_type', 'a.old_points', 'a.new_points', 'a.description', 'a.note'])
      .where('a.shop_id', '=', shopId)
      .where('a.seq', '>', after)
      .where('a.created_at', '>=', range.from)
      .where('a.created_at', '<', range.to)
      .orderBy('a.seq')
      .limit(pageSize)
      .execute();
    let chunk = '';
    for (const r of rows) {
      chunk += csvRecord([
        r.id, r.created_at.toISOString(), r.customer_id, r.shopify_customer_id, r.email, r.type, r.setting_type, r.new_points - r.old_points,
        r.old_points, r.new_points, r.description, r.note,
      ]);
    }
    if (chunk) yield chunk;
    if (rows.length < pageSize) return;
    after = Number(rows.at(-1)!.seq);
  }
}
