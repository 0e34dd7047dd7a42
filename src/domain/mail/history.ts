import { sql } from 'kysely';
import type { DB } from '../../db/database.js';
import { type PurgeOptions, purgeRowsBefore } from '../../db/purge.js';
import type { MailStatus } from '../../db/schema.js';
import type { Queryable } from '../../db/transaction.js';
import { beforeTimeCursor, encodeTimeCursor, type Page, type PageArgs } from '../kernel/index.js';
import type { MailKind } from './templates.js';

/** One e-mail to a customer as the admin API shows it: what, its state, when and how it went. */
export type MailRecord = {
  id: string;
  kind: MailKind;
  status: MailStatus;
  toAddress: string | null;
  attempts: number;
  lastError: string | null;
  createdAt: Date;
  sentAt: Date | null;
  /** Queued: when it is due (or its lease ends); null once settled. */
  dueAt: Date | null;
};

/** The customer's e-mails, newest first (keyset pages on (created_at, id)); the customer is the shop's own (the caller checked). */
export async function listCustomerMail(db: Queryable, shopId: string, customerId: string, args: PageArgs): Promise<Page<MailRecord>> {
  let query = db.selectFrom('mail_messages').selectAll().where('shop_id', '=', shopId).where('customer_id', '=', customerId);
  if (args.after) query = query.where(beforeTimeCursor(args.after));
  const rows = await query.orderBy('created_at', 'desc').orderBy('id', 'desc').limit(args.first + 1).execute();
  const items = rows.slice(0, args.first).map((row) => ({
    node: {
      id: row.id, kind: row.kind as MailKind, status: row.status, toAddress: row.to_address, attempts: row.attempts, lastError: row.last_error,
      createdAt: row.created_at, sentAt: row.sent_at, dueAt: row.due_at,
    },
    cursor: encodeTimeCursor(row),
  }));
  return { items, hasNextPage: rows.length > items.length };
}

/** Retention: settled e-mails (sent, failed, suppressed, skipped) last changed before `before`; queued ones stay whatever their age. */
export function purgeOldMail(db: DB, before: Date, options: PurgeOptions = {}): Promise<number> {
  return purgeRowsBefore(db, 'mail_messages', 'updated_at', before, options, sql<boolean>`due_at is null`);
}
