import { z } from 'zod';
import type { DB } from '../../db/database.js';
import { inTransaction, type Queryable } from '../../db/transaction.js';
import { type Actor, recordAudit } from '../audit/index.js';
import { parseInput } from '../kernel/index.js';
import { builtInTemplate, MAIL_KINDS, MAIL_VARIABLES, type MailKind, type ShopTemplate, templateProblems } from './templates.js';

/** A kind's template as the API shows it: the shop's own or, unset, the built-in one. */
export type MailTemplate = ShopTemplate & { kind: MailKind; custom: boolean; variables: readonly string[]; updatedAt: Date | null };

/** The shop's own templates by kind (the kinds it never edited are absent). */
export async function shopTemplates(db: Queryable, shopId: string): Promise<Partial<Record<MailKind, ShopTemplate>>> {
  const rows = await db.selectFrom('mail_templates').select(['kind', 'subject', 'body']).where('shop_id', '=', shopId).execute();
  return Object.fromEntries(rows.filter((r) => (MAIL_KINDS as readonly string[]).includes(r.kind)).map((r) => [r.kind, { subject: r.subject, body: r.body }]));
}

/** Every kind's template, in MAIL_KINDS order. */
export async function listMailTemplates(db: Queryable, shopId: string): Promise<MailTemplate[]> {
  const rows = await db.selectFrom('mail_templates').selectAll().where('shop_id', '=', shopId).execute();
  const own = new Map(rows.map((r) => [r.kind, r]));
  return MAIL_KINDS.map((kind) => {
    const row = own.get(kind);
    const words = row ? { subject: row.subject, body: row.body } : builtInTemplate(kind);
    return { kind, ...words, custom: row !== undefined, variables: MAIL_VARIABLES[kind], updatedAt: row?.updated_at ?? null };
  });
}

/** A subject and body the shop may save for `kind`, or a preview may draft: each unknown variable or stray brace is an issue on its field. */
export const mailTemplateSchema = (kind: MailKind) =>
  z.strictObject({
    subject: z.string().trim().min(1).max(300).regex(/^[^\r\n]*$/, 'one line'),
    body: z.string().trim().min(1).max(10_000),
  }).superRefine((value, ctx) => {
    for (const field of ['subject', 'body'] as const) {
      for (const message of templateProblems(kind, value[field])) ctx.addIssue({ code: 'custom', path: [field], message });
    }
  });

const inputSchema = z.strictObject({ kind: z.enum(MAIL_KINDS), subject: z.unknown(), body: z.unknown() });

/** Saves the shop's own subject and body for a kind, checked first (mailTemplateSchema). */
export async function setMailTemplate(db: DB, shopId: string, raw: unknown, now: Date, actor?: Actor): Promise<MailTemplate> {
  const { kind, ...rest } = parseInput(inputSchema, raw);
  const words = parseInput(mailTemplateSchema(kind), rest);
  return inTransaction(db, async (trx) => {
    const before = await trx.selectFrom('mail_templates').select(['subject', 'body']).where('shop_id', '=', shopId).where('kind', '=', kind).executeTakeFirst();
    await trx
      .insertInto('mail_templates')
      .values({ shop_id: shopId, kind, ...words, updated_at: now })
      .onConflict((oc) => oc.columns(['shop_id', 'kind']).doUpdateSet({ ...words, updated_at: now }))
      .execute();
    await recordAudit(trx, shopId, actor, { kind: 'mailTemplate.update', subject: { type: 'mailTemplate', id: kind }, before: before ?? null, after: words }, now);
    return { kind, ...words, custom: true, variables: MAIL_VARIABLES[kind], updatedAt: now };
  });
}

/** Back to the built-in template for a kind. */
export async function resetMailTemplate(db: DB, shopId: string, kind: MailKind, now: Date, actor?: Actor): Promise<MailTemplate> {
  return inTransaction(db, async (trx) => {
    const before = await trx.deleteFrom('mail_templates').where('shop_id', '=', shopId).where('kind', '=', kind).returning(['subject', 'body']).executeTakeFirst();
    if (before) await recordAudit(trx, shopId, actor, { kind: 'mailTemplate.reset', subject: { type: 'mailTemplate', id: kind }, before, after: null }, now);
    return { kind, ...builtInTemplate(kind), custom: false, variables: MAIL_VARIABLES[kind], updatedAt: null };
  });
}
