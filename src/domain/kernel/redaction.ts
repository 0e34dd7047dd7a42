import { type RawBuilder, sql } from 'kysely';

/**
 * Personal values replaced in stored JSON (a customer's erasure): each pair is a text as jsonb
 * prints it (`"email": "ada@example.com"`) and what takes its place. Textual, so the stored
 * document keeps its shape wherever the value sits in it; in any letter case, as e-mails are
 * matched (one stored as Ada@… is the same address as ada@…).
 */
export type Redactions = ReadonlyArray<readonly [from: string, to: string]>;

/** A jsonb column with the redactions made. */
export function redactedJsonb(column: RawBuilder<unknown>, redactions: Redactions): RawBuilder<string> {
  let text: RawBuilder<unknown> = sql`${column}::text`;
  for (const [from, to] of redactions) text = sql`regexp_replace(${text}, ${literalPattern(from)}, ${to.replaceAll('\\', '\\\\')}, 'gi')`;
  return sql<string>`${text}::jsonb`;
}

/** Whether a jsonb column holds any of the redactions' values. */
export function holdsAny(column: RawBuilder<unknown>, redactions: Redactions): RawBuilder<boolean> {
  if (redactions.length === 0) return sql<boolean>`false`;
  return containsAny(sql`${column}::text`, redactions.map(([from]) => from));
}

/** Whether a text holds any of `marks`, in any letter case. */
export function containsAny(text: RawBuilder<unknown>, marks: readonly string[]): RawBuilder<boolean> {
  if (marks.length === 0) return sql<boolean>`false`;
  return sql<boolean>`(${sql.join(marks.map((mark) => sql`strpos(lower(${text}), ${mark.toLowerCase()}) > 0`), sql` or `)})`;
}

/** A regular expression matching `text` as it is. */
const literalPattern = (text: string) => text.replace(/[\\^$.|?*+()[\]{}]/g, '\\$&');
