import { sql } from 'kysely';
import { z } from 'zod';
import type { DB } from '../../db/database.js';
import type { AuditLogTable } from '../../db/schema.js';
import type { Queryable, Trx } from '../../db/transaction.js';
import { beforeTimeCursor, type DueWork, encodeTimeCursor, failedItems, holdsAny, newId, type Page, type PageArgs, parseInput, redactedJsonb, type Redactions, runClaimedInBatches } from '../kernel/index.js';

/**
 * The audit log (docs/console.md "Audit log"; issue 35): every administrative change by a person
 * or an API key, with who, when, what and the values before and after. A row is written by the
 * change itself, in its transaction (`recordAudit(trx, …)`), so a change and its row commit or
 * roll back together. The actor is passed in explicitly by the adapter that knows it (GraphQL's
 * context, REST's key): a domain write without one (the CLI, imports, a test) records nothing.
 */

/** Who made a change: a person (their e-mail) or an API key (its public prefix). */
export type Actor = { kind: 'staff' | 'api_key'; id: string; label: string };

/** An API key as the log names it: its public prefix (keys have no name), which outlives the key. */
export function apiKeyActor(key: { id: string; prefix: string }): Actor {
  return { kind: 'api_key', id: key.id, label: `lk_${key.prefix}` };
}

export function staffActor(staff: { staffId: string; email: string }): Actor {
  return { kind: 'staff', id: staff.staffId, label: staff.email };
}

export type AuditEntry = {
  /** `<object>.<verb>`: earningRule.update, points.add, staff.invite, … */
  kind: string;
  subject?: { type: string; id: string } | null;
  before?: unknown;
  after?: unknown;
};

export type AuditRecord = {
  _id: string;
  at: Date;
  actorKind: Actor['kind'];
  actorId: string;
  actorLabel: string;
  kind: string;
  subjectType: string | null;
  subjectId: string | null;
  before: unknown;
  after: unknown;
};

/** An update's entry: only the top-level fields whose values differ, before and after. */
export function changedFields<T extends object>(before: T, after: T): { before: Partial<T>; after: Partial<T> } {
  const keys = Object.keys(after).filter((k) => JSON.stringify(before[k as keyof T]) !== JSON.stringify(after[k as keyof T])) as Array<keyof T>;
  return { before: Object.fromEntries(keys.map((k) => [k, before[k]])) as Partial<T>, after: Object.fromEntries(keys.map((k) => [k, after[k]])) as Partial<T> };
}

/**
 * Field names whose values never reach the log, at any depth: secrets, key hashes, passwords,
 * tokens. A net under the entries, which are built of the API's own shapes and carry none.
 */
const SECRET_FIELD = /(secret|password|hash|token|^key|^apikey)$/i;

/** A value as the log keeps it: JSON, without the fields SECRET_FIELD names. */
function scrub(value: unknown): unknown {
  if (value === undefined) return null;
  if (value instanceof Date) return value.toISOString();
  if (Array.isArray(value)) return value.map(scrub);
  if (value && typeof value === 'object') {
    return Object.fromEntries(Object.entries(value).filter(([k, v]) => !SECRET_FIELD.test(k) && v !== undefined).map(([k, v]) => [k, scrub(v)]));
  }
  return value;
}

/** Writes the change's row in its transaction; nothing when no person or key made it. */
export async function recordAudit(trx: Trx, shopId: string, actor: Actor | undefined, entry: AuditEntry, at = new Date()): Promise<void> {
  if (!actor) return;
  await trx.insertInto('audit_log').values(auditRow(shopId, actor, entry, at)).execute();
}

function auditRow(shopId: string, actor: Actor, entry: AuditEntry, at: Date) {
  const json = (value: unknown) => (value === undefined || value === null ? null : JSON.stringify(scrub(value)));
  return {
    id: newId(),
    shop_id: shopId,
    at,
    actor_kind: actor.kind,
    actor_id: actor.id,
    actor_label: actor.label,
    kind: entry.kind,
    subject_type: entry.subject?.type ?? null,
    subject_id: entry.subject?.id ?? null,
    before: json(entry.before),
    after: json(entry.after),
  };
}

const auditFilterSchema = z.strictObject({
  actor: z.string().trim().min(1).max(64).nullish(),
  kind: z.string().trim().min(1).max(64).nullish(),
  from: z.date().nullish(),
  to: z.date().nullish(),
});
export type AuditFilter = z.input<typeof auditFilterSchema>;

function toRecord(row: { [K in keyof AuditLogTable]: K extends 'before' | 'after' ? unknown : AuditLogTable[K] }): AuditRecord {
  return {
    _id: row.id,
    at: row.at,
    actorKind: row.actor_kind,
    actorId: row.actor_id,
    actorLabel: row.actor_label,
    kind: row.kind,
    subjectType: row.subject_type,
    subjectId: row.subject_id,
    before: row.before,
    after: row.after,
  };
}

/**
 * The shop's log newest first, filtered by actor (its id), kind (exact), from (inclusive) and to
 * (exclusive); keyset pages on (at, id), an index range of audit_log_page_idx (or of the actor's or
 * kind's index when filtered).
 */
export async function listAuditLog(db: Queryable, shopId: string, filter: AuditFilter, args: PageArgs): Promise<Page<AuditRecord>> {
  const f = parseInput(auditFilterSchema, filter);
  let query = db.selectFrom('audit_log').selectAll().where('shop_id', '=', shopId);
  if (f.actor) query = query.where('actor_id', '=', f.actor);
  if (f.kind) query = query.where('kind', '=', f.kind);
  if (f.from) query = query.where('at', '>=', f.from);
  if (f.to) query = query.where('at', '<', f.to);
  if (args.after) query = query.where(beforeTimeCursor(args.after, 'at'));
  const rows = await query.orderBy('at', 'desc').orderBy('id', 'desc').limit(args.first + 1).execute();
  return {
    items: rows.slice(0, args.first).map((row) => ({ node: toRecord(row), cursor: encodeTimeCursor({ created_at: row.at, id: row.id }) })),
    hasNextPage: rows.length > args.first,
  };
}

/** Rows one purge transaction deletes at most: short, so live writes of the shop never wait long. */
const PURGE_PER_TRANSACTION = 5000;

/** The due-work kind: a shop whose log holds rows older than its audit_retention_days. */
const KIND = 'audit_purge';

/**
 * Deletes rows past their shop's retention (DESIGN.md "Time-driven work"): due shops are claimed
 * FOR NO KEY UPDATE SKIP LOCKED, so one instance purges a shop at a time, and each shop fails
 * alone (runClaimed). A shop with more than a transaction's rows is due again at once.
 */
export const auditPurge: DueWork = {
  name: KIND,
  runDue: (db: DB, now: Date, limit: number) =>
    runClaimedInBatches(db, now, KIND, limit, 1, {
      claim: async (trx, batch, skip) => {
        let query = trx
          .selectFrom('shops as s')
          .select(['s.id', 's.audit_retention_days'])
          .where(({ exists, selectFrom }) =>
            exists(selectFrom('audit_log as a').select('a.id').whereRef('a.shop_id', '=', 's.id').where('a.at', '<', cutoff(now, sql.ref('s.audit_retention_days')))),
          );
        if (skip.length) query = query.where('s.id', 'not in', skip);
        return query.orderBy('s.id').limit(batch).forNoKeyUpdate().skipLocked().execute();
      },
      keyOf: (shop) => ({ item: shop.id, shopId: shop.id }),
      work: async (trx, shops) => {
        let deleted = 0;
        for (const shop of shops) {
          const result = await trx
            .deleteFrom('audit_log')
            .where('id', 'in', (eb) =>
              eb.selectFrom('audit_log').select('id').where('shop_id', '=', shop.id).where('at', '<', cutoff(now, shop.audit_retention_days)).orderBy('at').limit(PURGE_PER_TRANSACTION),
            )
            .executeTakeFirst();
          deleted += Number(result.numDeletedRows);
        }
        return deleted;
      },
    }),
  async oldestDue(db: DB, now: Date): Promise<Date | null> {
    const skip = await failedItems(db, KIND);
    let query = db
      .selectFrom('shops as s')
      .innerJoinLateral(
        (eb) => eb.selectFrom('audit_log as a').select('a.at').whereRef('a.shop_id', '=', 's.id').orderBy('a.at').limit(1).as('oldest'),
        (join) => join.onTrue(),
      )
      .select(sql<Date>`min(oldest.at + s.audit_retention_days * interval '1 day')`.as('due'));
    if (skip.length) query = query.where('s.id', 'not in', skip);
    const row = await query.executeTakeFirst();
    return row?.due && row.due <= now ? row.due : null;
  },
};

function cutoff(now: Date, days: number | ReturnType<typeof sql.ref>) {
  return sql<Date>`${now}::timestamptz - ${days} * interval '1 day'`;
}

/** Replaces a person's values in the shop's audit rows (a customer's erasure, in its transaction): who changed what stays, their data goes. */
export async function redactAuditValues(trx: Trx, shopId: string, redactions: Redactions): Promise<void> {
  for (const column of ['before', 'after'] as const) {
    await trx
      .updateTable('audit_log')
      .set({ [column]: redactedJsonb(sql.ref(column), redactions) })
      .where('shop_id', '=', shopId)
      .where(holdsAny(sql.ref(column), redactions))
      .execute();
  }
}
