import { type Expression, type Kysely, type RawBuilder, type SelectQueryBuilder, sql } from 'kysely';
import type { Queryable } from '../../db/transaction.js';
import { ValidationError } from './errors.js';

export type PageArgs = { first: number; after?: string | null | undefined };
export type Page<T> = { items: Array<{ node: T; cursor: string }>; hasNextPage: boolean };

/** What a REST list answers as `nextCursor`: `after` for the page that follows, null on the last. */
export function nextCursor<T>(page: Page<T>): string | null {
  return page.hasNextPage ? page.items.at(-1)!.cursor : null;
}

/** Keyset cursors: the sort key of the last row seen, opaque to clients (base64url JSON). */
export function encodeCursor(key: Array<string | number>): string {
  return Buffer.from(JSON.stringify(key)).toString('base64url');
}

export function decodeCursor(cursor: string, parts: number): string[] {
  try {
    const key: unknown = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
    if (Array.isArray(key) && key.length === parts && key.every((k) => typeof k === 'string' || typeof k === 'number')) {
      return key.map(String);
    }
  } catch {
    // fall through: any undecodable cursor is the client's mistake
  }
  throw invalidCursor();
}

/** A cursor holding one integer sort key (a `seq` column). */
export function decodeSeqCursor(cursor: string): number {
  const [seq = ''] = decodeCursor(cursor, 1);
  const value = Number(seq);
  if (!Number.isSafeInteger(value)) throw invalidCursor();
  return value;
}

/** The cursor of a newest-first list ordered by (created_at, id). */
export function encodeTimeCursor(row: { created_at: Date; id: string }): string {
  return encodeCursor([row.created_at.toISOString(), row.id]);
}

export function decodeTimeCursor(cursor: string): { at: Date; id: string } {
  const [createdAt = '', id = ''] = decodeCursor(cursor, 2);
  const at = new Date(createdAt);
  if (Number.isNaN(at.getTime())) throw invalidCursor();
  return { at, id };
}

/**
 * Rows past a newest-first time cursor, as a row comparison on the (created_at, id) columns of the
 * query (or (`column`, id)): an index range, where `created_at < x or (created_at = x and id < y)`
 * is only a filter.
 */
export function beforeTimeCursor(cursor: string, column = 'created_at'): RawBuilder<boolean> {
  const { at, id } = decodeTimeCursor(cursor);
  return sql<boolean>`(${sql.ref(column)}, id) < (${at}, ${id})`;
}

export function invalidCursor(): ValidationError {
  return new ValidationError('after: not a cursor this API returned', [{ path: 'after', message: 'invalid cursor' }]);
}

/**
 * A list keyed by (parent, seq), its table's primary key: a customer's ledger or discount codes, a
 * referrer's referees. `rowsOf` is the query of one parent's rows as a page returns them (joins
 * included), given the parent id to filter on; `column` names their seq as that query does.
 */
export type SeqList<R extends { seq: number }> = {
  table: 'activities' | 'discount_codes' | 'referrals' | 'orders';
  parent: 'customer_id' | 'referrer_id' | 'shop_id';
  rowsOf: (parentId: Expression<string>) => SelectQueryBuilder<any, any, R>;
  column: string;
  direction: 'asc' | 'desc';
};

/**
 * The rows of one parent's page: past the cursor, in order, one more than asked to learn whether
 * more follow. The page's far end is found first, on the primary key alone (an index-only scan),
 * and bounds the rows query to exactly the page's index range: the planner cannot know how many
 * rows a parent has (it assumes the average), and for a parent with very many it would otherwise
 * read them all and sort them.
 */
function seqPageRows<R extends { seq: number }>(db: Queryable, list: SeqList<R>, parentId: Expression<string>, args: PageArgs) {
  const desc = list.direction === 'desc';
  const cursor = args.after === undefined || args.after === null ? undefined : decodeSeqCursor(args.after);
  let keys = (db as Kysely<any>).selectFrom(`${list.table} as k`).select('k.seq').where(`k.${list.parent}`, '=', parentId);
  if (cursor !== undefined) keys = keys.where('k.seq', desc ? '<' : '>', cursor);
  const lastKey = keys.orderBy('k.seq', list.direction).offset(args.first).limit(1);
  // No such key: the page runs to the parent's end (seq is never below 1 nor above int8's maximum).
  const farEnd = sql<number>`coalesce((${lastKey}), ${sql.raw(desc ? '0' : '9223372036854775807')})`;
  let query = list.rowsOf(parentId).where(list.column, desc ? '>=' : '<=', farEnd);
  if (cursor !== undefined) query = query.where(list.column, desc ? '<' : '>', cursor);
  return query.orderBy(list.column, list.direction).limit(args.first + 1);
}

function toSeqPage<R extends { seq: number }, T>(rows: R[], args: PageArgs, toNode: (row: R) => T): Page<T> {
  return {
    items: rows.slice(0, args.first).map((row) => ({ node: toNode(row), cursor: encodeCursor([row.seq]) })),
    hasNextPage: rows.length > args.first,
  };
}

/**
 * Keyset pages of many parents in one statement (a list's nested connection): each parent's page
 * is a lateral subquery, the same index range a single page is. The pages come in the order of
 * `parentIds`.
 */
export async function pagesBySeq<R extends { seq: number }, T>(
  db: Queryable,
  parentIds: readonly string[],
  list: SeqList<R>,
  args: PageArgs,
  toNode: (row: R) => T,
): Promise<Array<Page<T>>> {
  const rows = (await db
    .selectFrom(sql`unnest(${[...parentIds]}::text[])`.as('parent'))
    .innerJoinLateral(() => seqPageRows(db, list, sql.ref('parent'), args).as('page'), (join) => join.onTrue())
    .selectAll('page')
    .select(sql<string>`parent`.as('page_parent'))
    // Each parent's rows in page order (they are grouped below).
    .orderBy(sql.ref('page.seq'), list.direction)
    .execute()) as unknown as Array<R & { page_parent: string }>;
  const byParent = new Map<string, R[]>(parentIds.map((id) => [id, []]));
  for (const row of rows) byParent.get(row.page_parent)!.push(row);
  return parentIds.map((id) => toSeqPage(byParent.get(id)!, args, toNode));
}

/** One parent's page: the same statement with one parent. */
export async function pageBySeq<R extends { seq: number }, T>(
  db: Queryable,
  parentId: string,
  list: SeqList<R>,
  args: PageArgs,
  toNode: (row: R) => T,
): Promise<Page<T>> {
  const [page] = await pagesBySeq(db, [parentId], list, args, toNode);
  return page!;
}
