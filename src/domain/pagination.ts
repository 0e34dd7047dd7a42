import { type Expression, type SelectQueryBuilder, sql } from 'kysely';
import type { Queryable } from '../db/transaction.js';
import { ValidationError } from './errors.js';

export type PageArgs = { first: number; after?: string | null | undefined };
export type Page<T> = { items: Array<{ node: T; cursor: string }>; hasNextPage: boolean };

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

export function invalidCursor(): ValidationError {
  return new ValidationError('after: not a cursor this API returned', [{ path: 'after', message: 'invalid cursor' }]);
}

/** How a list is paged by an integer `seq` column (`column`, as the query names it). */
type SeqOrder = { column: string; direction: 'asc' | 'desc' };
const NEWEST_FIRST: SeqOrder = { column: 'seq', direction: 'desc' };

/** The rows of one page: past the cursor, in order, one more than asked to learn whether more follow. */
function seqPageRows<Q extends SelectQueryBuilder<any, any, any>>(query: Q, args: PageArgs, order: SeqOrder): Q {
  const paged = args.after ? query.where(order.column, order.direction === 'desc' ? '<' : '>', decodeSeqCursor(args.after)) : query;
  return paged.orderBy(order.column, order.direction).limit(args.first + 1) as Q;
}

function toSeqPage<R extends { seq: number }, T>(rows: R[], args: PageArgs, toNode: (row: R) => T): Page<T> {
  return {
    items: rows.slice(0, args.first).map((row) => ({ node: toNode(row), cursor: encodeCursor([row.seq]) })),
    hasNextPage: rows.length > args.first,
  };
}

/** A newest-first keyset page over a query of rows with a `seq` column (a customer's ledger, its discount codes). */
export async function pageBySeqDesc<R extends { seq: number }, T>(
  query: SelectQueryBuilder<any, any, R>,
  args: PageArgs,
  toNode: (row: R) => T,
): Promise<Page<T>> {
  return toSeqPage(await seqPageRows(query, args, NEWEST_FIRST).execute(), args, toNode);
}

/**
 * Keyset pages of many parents in one statement (a list's nested connection): each parent's page
 * is a lateral subquery, the same index range scan a single page is. `rowsOf` is the query of one
 * parent's rows, given the parent id to filter on; pages are newest first unless `order` says
 * otherwise. The pages come in the order of `parentIds`.
 */
export async function pagesBySeq<R extends { seq: number }, T>(
  db: Queryable,
  parentIds: readonly string[],
  rowsOf: (parentId: Expression<string>) => SelectQueryBuilder<any, any, R>,
  args: PageArgs,
  toNode: (row: R) => T,
  order: SeqOrder = NEWEST_FIRST,
): Promise<Array<Page<T>>> {
  const rows = (await db
    .selectFrom(sql`unnest(${[...parentIds]}::text[])`.as('parent'))
    .innerJoinLateral(() => seqPageRows(rowsOf(sql.ref('parent')), args, order).as('page'), (join) => join.onTrue())
    .selectAll('page')
    .select(sql<string>`parent`.as('page_parent'))
    // Each parent's rows in page order (they are grouped below).
    .orderBy(sql.ref('page.seq'), order.direction)
    .execute()) as unknown as Array<R & { page_parent: string }>;
  const byParent = new Map<string, R[]>(parentIds.map((id) => [id, []]));
  for (const row of rows) byParent.get(row.page_parent)!.push(row);
  return parentIds.map((id) => toSeqPage(byParent.get(id)!, args, toNode));
}
