import { sql } from 'kysely';
import type { DB } from '../../db/database.js';
import { inTransaction, type Queryable } from '../../db/transaction.js';
import { NotFoundError } from '../kernel/index.js';
import { SHOP_TABLES, shopRows } from './shop-tables.js';

/** Rows per fetch from a table's cursor: the export holds a page of them, whatever the shop's size. */
const FETCH = 1000;

/**
 * Column names an archive leaves out: key hashes and sealed secrets (useless without this
 * service's SECRETS_KEY, and not the shop's to carry), passwords, tokens' hashes.
 */
const SECRET_COLUMN = /(secret|hash|password|sealed)/i;

const SHOP_ARCHIVE_FORMAT = 'loyalty-shop-archive';

/**
 * Everything of one shop as NDJSON lines (issue 37, item 5), each handed to `write` (which may
 * wait: the caller's backpressure): a header, then one line per row `{"table": …, "row": …}`, the
 * shop's row first and parents before their children, as a restore would insert them. Rows are
 * read through a server-side cursor in one REPEATABLE READ transaction: one instant across the
 * tables, a page in memory at a time. Each row is PostgreSQL's own JSON of it (to_jsonb), so
 * bigints and decimals keep every digit. Returns the rows written per table.
 */
export async function writeShopArchive(db: DB, shopId: string, write: (line: string) => Promise<void> | void, now = new Date()): Promise<Record<string, number>> {
  return inTransaction(db, async (trx) => {
    await sql`set transaction isolation level repeatable read, read only`.execute(trx);
    const shop = await trx.selectFrom('shops').select('id').where('id', '=', shopId).executeTakeFirst();
    if (!shop) throw new NotFoundError('shop_not_found', `no shop with id ${shopId}`, ['shop']);
    const omitted = await secretColumns(trx);
    const sources = [{ table: 'shops', from: sql`shops t where t.id = ${shopId}` }, ...[...SHOP_TABLES].reverse().map((spec) => ({ table: spec.table, from: shopRows(spec, shopId) }))];
    await write(JSON.stringify({ format: SHOP_ARCHIVE_FORMAT, version: 1, shopId, exportedAt: now.toISOString(), tables: sources.map((s) => s.table), omittedColumns: Object.fromEntries(omitted) }));
    const counts: Record<string, number> = {};
    for (const { table, from } of sources) {
      counts[table] = 0;
      await sql`declare shop_archive no scroll cursor for select (to_jsonb(t) - ${sql.val(omitted.get(table) ?? [])}::text[])::text as row from ${from}`.execute(trx);
      for (;;) {
        const { rows } = await sql<{ row: string }>`fetch ${sql.raw(String(FETCH))} from shop_archive`.execute(trx);
        for (const r of rows) await write(`{"table":${JSON.stringify(table)},"row":${r.row}}`);
        counts[table] += rows.length;
        if (rows.length < FETCH) break;
      }
      await sql`close shop_archive`.execute(trx);
    }
    return counts;
  });
}

/** Per table of the schema, the columns SECRET_COLUMN names. */
async function secretColumns(db: Queryable): Promise<Map<string, string[]>> {
  const { rows } = await sql<{ table_name: string; column_name: string }>`
    select table_name, column_name from information_schema.columns where table_schema = current_schema() order by table_name, ordinal_position`.execute(db);
  const map = new Map<string, string[]>();
  for (const r of rows) if (SECRET_COLUMN.test(r.column_name)) map.set(r.table_name, [...(map.get(r.table_name) ?? []), r.column_name]);
  return map;
}
