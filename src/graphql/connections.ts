import { type Page, type PageArgs, ValidationError } from '../domain/kernel/index.js';
import { builder } from './builder.js';

type RelayArgs = { first?: number | null; after?: string | null };

export const DEFAULT_PAGE = 20;
export const MAX_PAGE = 250;

/**
 * Connections page forward only (keyset cursors), so they offer `first` and `after` and nothing
 * else: Pothos's connection helpers would add `last` and `before` too, only to refuse them.
 */
export const PAGE_ARGS = builder.args((t) => ({
  first: t.int({ required: false, description: `Page width, 1 to ${MAX_PAGE}; ${DEFAULT_PAGE} when omitted.` }),
  after: t.string({ required: false, description: 'The endCursor of the previous page.' }),
}));

/** `first` 1..250, default 20, and `after`. */
export function forwardPageArgs(args: RelayArgs): PageArgs {
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
