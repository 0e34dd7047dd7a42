import { ValidationError } from '../domain/errors.js';
import type { Page, PageArgs } from '../domain/pagination.js';

type RelayArgs = { first?: number | null; after?: string | null; last?: number | null; before?: string | null };

export const DEFAULT_PAGE = 20;
export const MAX_PAGE = 250;

/** Connections page forward only (keyset cursors): `first` 1..250, default 20, and `after`. */
export function forwardPageArgs(args: RelayArgs): PageArgs {
  if (args.last != null || args.before != null) {
    throw new ValidationError('connections page forward only: use first and after', [
      { path: args.last != null ? 'last' : 'before', message: 'not supported' },
    ]);
  }
  const first = args.first ?? DEFAULT_PAGE;
  if (!Number.isInteger(first) || first < 1 || first > MAX_PAGE) {
    throw new ValidationError(`first must be between 1 and ${MAX_PAGE}`, [{ path: 'first', message: 'out of range' }]);
  }
  return { first, after: args.after };
}

/** The connections of many parents that share the arguments (a nested connection's loader is per path). */
export async function connectionsOf<T>(args: RelayArgs, load: (pageArgs: PageArgs) => Promise<Array<Page<T>>>) {
  return (await load(forwardPageArgs(args))).map(toConnection);
}

export function toConnection<T>(page: Page<T>) {
  return {
    edges: page.items,
    pageInfo: {
      hasNextPage: page.hasNextPage,
      hasPreviousPage: false,
      startCursor: page.items[0]?.cursor ?? null,
      endCursor: page.items.at(-1)?.cursor ?? null,
    },
  };
}
