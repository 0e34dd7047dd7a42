import { type RawBuilder, sql } from 'kysely';

/**
 * Personal values replaced in stored JSON (a customer's erasure): each pair is a text as jsonb
 * prints it (`"email": "ada@example.com"`) and what takes its place. Textual, so the stored
 * document keeps its shape wherever the value sits in it.
 */
export type Redactions = ReadonlyArray<readonly [from: string, to: string]>;

/** A jsonb column with the redactions made. */
export function redactedJsonb(column: RawBuilder<unknown>, redactions: Redactions): RawBuilder<string> {
  let text: RawBuilder<unknown> = sql`${column}::text`;
  for (const [from, to] of redactions) text = sql`replace(${text}, ${from}, ${to})`;
  return sql<string>`${text}::jsonb`;
}

/** Whether a jsonb column holds any of the redactions' values. */
export function holdsAny(column: RawBuilder<unknown>, redactions: Redactions): RawBuilder<boolean> {
  if (redactions.length === 0) return sql<boolean>`false`;
  return sql<boolean>`(${sql.join(redactions.map(([from]) => sql`strpos(${column}::text, ${from}) > 0`), sql` or `)})`;
}
