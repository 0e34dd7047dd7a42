import type { z } from 'zod';
import { ValidationError } from './errors.js';

/** A missing field (a body field, a query parameter) says "required", not "expected number, received undefined". */
const missingIsRequired: z.core.$ZodErrorMap = (issue) =>
  issue.code === 'invalid_type' && issue.input === undefined ? 'required' : undefined;

/** `schema.safeParse` with the domain's wording of issues; parseInput is the throwing form. */
export function safeParseInput<S extends z.ZodType>(schema: S, input: unknown): z.ZodSafeParseResult<z.output<S>> {
  return schema.safeParse(input, { error: missingIsRequired });
}

/** Parses input with a zod schema, turning a failure into the domain's ValidationError. */
export function parseInput<S extends z.ZodType>(schema: S, input: unknown): z.output<S> {
  const result = safeParseInput(schema, input);
  if (!result.success) throw validationErrorFrom(result.error.issues);
  const bad = pathToUnstorable(result.data);
  if (bad) throw validationErrorFrom([{ path: bad, message: UNSTORABLE_MESSAGE }]);
  return result.data;
}

export const UNSTORABLE_MESSAGE = 'must not contain the NUL character (U+0000) or a lone UTF-16 surrogate';

/**
 * PostgreSQL text cannot hold U+0000, and its json parser refuses a lone surrogate ("\ud800", which
 * JSON may carry): a string with either fails in the database (a 500) instead of being refused as
 * bad input. Returns the path of the first such string (or object key) in parsed input, if any.
 */
// With the u flag a surrogate pair reads as one code point, so only a lone surrogate is in category Cs.
const LONE_SURROGATE = /\p{Cs}/u;

export function pathToUnstorable(value: unknown): PropertyKey[] | null {
  // Walked on every request: the path is built only on the way back from a bad string, never on the way down.
  if (typeof value === 'string') return value.includes('\u0000') || LONE_SURROGATE.test(value) ? [] : null;
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const found = pathToUnstorable(value[i]);
      if (found) return (found.unshift(i), found);
    }
  } else if (value !== null && typeof value === 'object' && Object.getPrototypeOf(value) === Object.prototype) {
    for (const key in value) {
      // A key too: jsonb refuses it there as well (a Shopify body is stored whole).
      if (pathToUnstorable(key)) return [key];
      const found = pathToUnstorable((value as Record<string, unknown>)[key]);
      if (found) return (found.unshift(key), found);
    }
  }
  return null;
}

type Issue = { path: ReadonlyArray<PropertyKey>; message: string };

/** `topics[0]`, `lineItems[2].price`: a path as a reader writes it, not `topics.0`. */
const readablePath = (path: ReadonlyArray<PropertyKey>) =>
  path.map((p, i) => (typeof p === 'number' ? `[${p}]` : i === 0 ? String(p) : `.${String(p)}`)).join('');

const issueText = (i: Issue) => (i.path.length ? `${readablePath(i.path)}: ${i.message}` : i.message);

/** The summary names the first issue; `details` has them all. */
export function validationErrorFrom(issues: ReadonlyArray<Issue>): ValidationError {
  const details = issues.map((i) => ({ path: i.path.map(String).join('.'), message: i.message }));
  return new ValidationError(issues[0] ? issueText(issues[0]) : 'invalid input', details);
}

/** Every issue in one line, for reports that have no room for `details` (an import's rejected line). */
export function describeIssues(issues: ReadonlyArray<Issue>): string {
  return issues.length ? issues.map(issueText).join('; ') : 'invalid input';
}
