import { DomainError, ValidationError } from '../domain/kernel/index.js';
import { builder, STOREFRONT } from './builder.js';

export type UserErrorShape = { code: string; field: string[] | null; message: string };

export const UserError = builder.objectRef<UserErrorShape>('UserError').implement({
  subGraphs: STOREFRONT,
  description: 'A problem with the input or a refusal by a business rule. `code` is the REST `error` string.',
  fields: (t) => ({
    code: t.exposeString('code'),
    field: t.exposeStringList('field', { nullable: true, description: 'Path to the input field at fault.' }),
    message: t.exposeString('message'),
  }),
});

/**
 * Every delete mutation answers the same way: the id it deleted, as `deleted<Resource>Id` (null when
 * refused), and userErrors. The resolver returns `{ deletedId }`.
 */
export function deletePayload(name: string, idField: `deleted${string}Id`) {
  return builder.objectRef<{ deletedId?: string; userErrors: UserErrorShape[] }>(name).implement({
    fields: (t) => ({
      [idField]: t.id({ nullable: true, resolve: (p) => p.deletedId ?? null }),
      userErrors: t.field({ type: [UserError], resolve: (p) => p.userErrors }),
    }),
  });
}

/**
 * Runs a mutation's domain call; a DomainError becomes the payload's `userErrors` (Shopify's
 * convention) while anything else stays a GraphQL error, masked by Yoga. The domain validates every
 * input, so invalid input arrives here too: one userError per field at fault, its path under `input`
 * (every mutation takes one `input` argument). Top-level errors stay for auth and malformed operations.
 */
export async function withUserErrors<T extends object>(
  run: () => Promise<T>,
): Promise<Partial<T> & { userErrors: UserErrorShape[] }> {
  try {
    return { ...(await run()), userErrors: [] };
  } catch (err) {
    if (!(err instanceof DomainError)) throw err;
    return { userErrors: userErrorsOf(err) } as Partial<T> & { userErrors: UserErrorShape[] };
  }
}

function userErrorsOf(err: DomainError): UserErrorShape[] {
  if (err instanceof ValidationError && err.details.length) {
    return err.details.map((d) => ({ code: err.code, field: inputPath(d.path.split('.').filter(Boolean)), message: d.message }));
  }
  return [{ code: err.code, field: err.field ? inputPath(err.field) : null, message: err.message }];
}

const inputPath = (path: string[]) => ['input', ...path];
