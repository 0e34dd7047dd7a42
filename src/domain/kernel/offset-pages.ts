import type { SelectQueryBuilder } from 'kysely';
import { z } from 'zod';

/** The contract's maximum `pageSize` on list endpoints. */
export const MAX_PAGE_SIZE = 250;

/** A positive integer, given as a number or as the digits of a query-string value. */
const positiveInteger = (max: number) =>
  z.preprocess(
    (value) => (typeof value === 'string' && /^\s*\d{1,10}\s*$/.test(value) ? Number(value) : value),
    z.number().int().min(1).max(max),
  );

/** `page` (from 1) and `pageSize` (1..250), both required, as the contract's list endpoints take them. */
export const offsetPageSchema = z.object({
  page: positiveInteger(1_000_000_000),
  pageSize: positiveInteger(MAX_PAGE_SIZE),
});
export type OffsetPage = z.output<typeof offsetPageSchema>;

export function offsetOf(page: OffsetPage): number {
  return (page.page - 1) * page.pageSize;
}

/**
 * The keys of one numbered page. An offset costs what it skips, so the skipping happens over a
 * narrow index of keys (an index-only scan) and the caller reads full rows for this page's keys only.
 */
export function pageOfKeys<Q extends SelectQueryBuilder<any, any, any>>(keys: Q, page: OffsetPage): Q {
  return keys.offset(offsetOf(page)).limit(page.pageSize) as Q;
}
