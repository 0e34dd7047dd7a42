import type { z } from 'zod';
import { ValidationError } from './errors.js';

/** Parses input with a zod schema, turning a failure into the domain's ValidationError. */
export function parseInput<S extends z.ZodType>(schema: S, input: unknown): z.output<S> {
  const result = schema.safeParse(input);
  if (!result.success) throw validationErrorFrom(result.error.issues);
  const nul = pathToNul(result.data);
  if (nul) throw validationErrorFrom([{ path: nul, message: 'must not contain the NUL character (U+0000)' }]);
  return result.data;
}

/**
 * PostgreSQL text cannot hold U+0000: a string with one fails in the database (a 500) instead of
 * being refused as bad input. Returns the path of the first such string in parsed input, if any.
 */
function pathToNul(value: unknown, path: PropertyKey[] = []): PropertyKey[] | null {
  if (typeof value === 'string') return value.includes('\u0000') ? path : null;
  if (Array.isArray(value)) {
    for (const [i, item] of value.entries()) {
      const found = pathToNul(item, [...path, i]);
      if (found) return found;
    }
  } else if (value !== null && typeof value === 'object' && Object.getPrototypeOf(value) === Object.prototype) {
    for (const [key, item] of Object.entries(value)) {
      const found = pathToNul(item, [...path, key]);
      if (found) return found;
    }
  }
  return null;
}

export function validationErrorFrom(
  issues: ReadonlyArray<{ path: ReadonlyArray<PropertyKey>; message: string }>,
): ValidationError {
  const details = issues.map((i) => ({ path: i.path.map(String).join('.'), message: i.message }));
  const first = details[0];
  const summary = first ? (first.path ? `${first.path}: ${first.message}` : first.message) : 'invalid input';
  return new ValidationError(summary, details);
}
