import type { z } from 'zod';
import { ValidationError } from './errors.js';

/** Parses input with a zod schema, turning a failure into the domain's ValidationError. */
export function parseInput<S extends z.ZodType>(schema: S, input: unknown): z.output<S> {
  const result = schema.safeParse(input);
  if (result.success) return result.data;
  throw validationErrorFrom(result.error.issues);
}

export function validationErrorFrom(
  issues: ReadonlyArray<{ path: ReadonlyArray<PropertyKey>; message: string }>,
): ValidationError {
  const details = issues.map((i) => ({ path: i.path.map(String).join('.'), message: i.message }));
  const first = details[0];
  const summary = first ? (first.path ? `${first.path}: ${first.message}` : first.message) : 'invalid input';
  return new ValidationError(summary, details);
}
