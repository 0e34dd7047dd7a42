import { DomainError } from '../domain/errors.js';
import { builder } from './builder.js';

export type UserErrorShape = { code: string; field: string[] | null; message: string };

export const UserError = builder.objectRef<UserErrorShape>('UserError').implement({
  description: 'A problem with the input or a refusal by a business rule. `code` is the REST `error` string.',
  fields: (t) => ({
    code: t.exposeString('code'),
    field: t.exposeStringList('field', { nullable: true, description: 'Path to the input field at fault.' }),
    message: t.exposeString('message'),
  }),
});

/**
 * Runs a mutation's domain call; a DomainError becomes the payload's `userErrors` (Shopify's
 * convention) while anything else stays a GraphQL error, masked by Yoga.
 */
export async function withUserErrors<T extends object>(
  run: () => Promise<T>,
): Promise<Partial<T> & { userErrors: UserErrorShape[] }> {
  try {
    return { ...(await run()), userErrors: [] };
  } catch (err) {
    if (!(err instanceof DomainError)) throw err;
    const userError = { code: err.code, field: err.field ? ['input', ...err.field] : null, message: err.message };
    return { userErrors: [userError] } as Partial<T> & { userErrors: UserErrorShape[] };
  }
}
