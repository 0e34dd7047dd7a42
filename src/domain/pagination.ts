import type { SelectQueryBuilder } from 'kysely';
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

/**
 * A newest-first keyset page over a query of rows with a `seq` column (a customer's ledger, its
 * discount codes): rows before the cursor, one more than asked to learn whether more follow.
 */
export async function pageBySeqDesc<R extends { seq: number }, T>(
  query: SelectQueryBuilder<any, any, R>,
  args: PageArgs,
  toNode: (row: R) => T,
): Promise<Page<T>> {
  const rows = await (args.after ? query.where('seq', '<', decodeSeqCursor(args.after)) : query)
    .orderBy('seq', 'desc')
    .limit(args.first + 1)
    .execute();
  return {
    items: rows.slice(0, args.first).map((row) => ({ node: toNode(row), cursor: encodeCursor([row.seq]) })),
    hasNextPage: rows.length > args.first,
  };
}
