import { z } from 'zod';
import type { ShopMailSettingsRow } from '../../db/schema.js';
import type { DB } from '../../db/database.js';
import { inTransaction, type Queryable } from '../../db/transaction.js';
import { type Actor, changedFields, recordAudit } from '../audit/index.js';
import { parseInput, type SecretBox } from '../kernel/index.js';
import { shopTemplates } from './shop-templates.js';
import { isSupportedLocale, MAIL_KINDS, type MailKind, type ShopTemplate } from './templates.js';

/** What a shop's mail settings say, as the API shows them: the password never, only whether one is set. */
export type MailSettings = {
  enabled: boolean;
  smtpHost: string;
  smtpPort: number;
  smtpSecurity: 'tls' | 'starttls' | 'none';
  smtpUser: string | null;
  passwordSet: boolean;
  fromName: string;
  fromAddress: string;
  kinds: MailKind[];
  /** The language of dates and numbers (a customer's own overrides it); null: English. */
  locale: string | null;
  updatedAt: Date | null;
};

/** The settings with the password opened, and the shop's own templates: for the worker only, never for an answer. */
export type OpenMailSettings = MailSettings & {
  shopId: string;
  shopName: string;
  timeZone: string;
  password: string | null;
  templates: Partial<Record<MailKind, ShopTemplate>>;
};

const DEFAULTS: MailSettings = {
  enabled: false,
  smtpHost: '',
  smtpPort: 587,
  smtpSecurity: 'starttls',
  smtpUser: null,
  passwordSet: false,
  fromName: '',
  fromAddress: '',
  kinds: [...MAIL_KINDS],
  locale: null,
  updatedAt: null,
};

const passwordContext = (shopId: string) => `mail:${shopId}`;

function toSettings(row: ShopMailSettingsRow | undefined): MailSettings {
  if (!row) return { ...DEFAULTS, kinds: [...DEFAULTS.kinds] };
  return {
    enabled: row.enabled,
    smtpHost: row.smtp_host,
    smtpPort: row.smtp_port,
    smtpSecurity: row.smtp_security,
    smtpUser: row.smtp_user,
    passwordSet: row.smtp_password_sealed !== null,
    fromName: row.from_name,
    fromAddress: row.from_address,
    kinds: row.kinds.filter((k): k is MailKind => (MAIL_KINDS as readonly string[]).includes(k)),
    locale: row.locale,
    updatedAt: row.updated_at,
  };
}

export async function getMailSettings(db: Queryable, shopId: string): Promise<MailSettings> {
  return toSettings(await db.selectFrom('shop_mail_settings').selectAll().where('shop_id', '=', shopId).executeTakeFirst());
}

/** A BCP 47 language tag that Intl writes dates and numbers in (en, de-CH, ja…). */
export const localeSchema = z.string().trim().max(35).regex(/^[A-Za-z]{2,3}(-[A-Za-z0-9]{2,8})*$/, { message: 'a language tag such as en, de or fr-CA', abort: true }).refine(isSupportedLocale, 'a language this server cannot write dates in');

const hostname = z.string().trim().max(253).regex(/^[A-Za-z0-9.-]*$/, 'a host name or IP address');
export const mailSettingsInputSchema = z.strictObject({
  enabled: z.boolean().optional(),
  smtpHost: hostname.optional(),
  smtpPort: z.number().int().min(1).max(65535).optional(),
  smtpSecurity: z.enum(['tls', 'starttls', 'none']).optional(),
  smtpUser: z.string().max(320).nullable().optional(),
  /** A new password; null removes it; left out keeps it. */
  smtpPassword: z.string().max(1000).nullable().optional(),
  fromName: z.string().trim().max(200).regex(/^[^\r\n"<>]*$/, 'no line breaks, quotes or angle brackets').optional(),
  fromAddress: z.union([z.literal(''), z.email()]).optional(),
  kinds: z.array(z.enum(MAIL_KINDS)).max(MAIL_KINDS.length).optional(),
  /** Null: English. */
  locale: localeSchema.nullable().optional(),
});
export type MailSettingsInput = z.input<typeof mailSettingsInputSchema>;

/**
 * Changes what the input names and keeps the rest. Switching sending on needs a server and a
 * sender address: a shop cannot turn on e-mails that could only fail.
 */
export async function updateMailSettings(db: DB, secrets: SecretBox, shopId: string, raw: unknown, now: Date, actor?: Actor): Promise<MailSettings> {
  const input = parseInput(mailSettingsInputSchema, raw);
  const current = await getMailSettings(db, shopId);
  const next = {
    enabled: input.enabled ?? current.enabled,
    smtp_host: input.smtpHost ?? current.smtpHost,
    smtp_port: input.smtpPort ?? current.smtpPort,
    smtp_security: input.smtpSecurity ?? current.smtpSecurity,
    smtp_user: input.smtpUser === undefined ? current.smtpUser : input.smtpUser || null,
    from_name: input.fromName ?? current.fromName,
    from_address: input.fromAddress ?? current.fromAddress,
    kinds: input.kinds ? [...new Set(input.kinds)] : current.kinds,
    locale: input.locale === undefined ? current.locale : input.locale,
    updated_at: now,
  };
  if (next.enabled && (!next.smtp_host || !next.from_address)) {
    parseInput(z.object({ smtpHost: z.string().min(1, 'set an SMTP server before switching e-mails on'), fromAddress: z.string().min(1, 'set a sender address before switching e-mails on') }), {
      smtpHost: next.smtp_host,
      fromAddress: next.from_address,
    });
  }
  const password = input.smtpPassword === undefined ? {} : { smtp_password_sealed: input.smtpPassword ? secrets.seal(input.smtpPassword, passwordContext(shopId)) : null };
  return inTransaction(db, async (trx) => {
    await trx
      .insertInto('shop_mail_settings')
      .values({ shop_id: shopId, ...next, ...password })
      .onConflict((oc) => oc.column('shop_id').doUpdateSet({ ...next, ...password }))
      .execute();
    const after = await getMailSettings(trx, shopId);
    // A new password is recorded as changed, never as itself.
    const { updatedAt: _before, ...was } = current;
    const { updatedAt: _after, ...is } = after;
    const change = changedFields(was, is);
    if (input.smtpPassword !== undefined) Object.assign(change.after, { passwordChanged: true });
    await recordAudit(trx, shopId, actor, { kind: 'mailSettings.update', subject: { type: 'shop', id: shopId }, ...change }, now);
    return after;
  });
}

/** The shop's settings with its password opened, its name, time zone and own templates; undefined for a shop that never saved any. */
export async function openMailSettings(db: Queryable, secrets: SecretBox, shopId: string): Promise<OpenMailSettings | undefined> {
  const row = await db
    .selectFrom('shop_mail_settings as m')
    .innerJoin('shops as s', 's.id', 'm.shop_id')
    .selectAll('m')
    .select(['s.name as shop_name', 's.timezone'])
    .where('m.shop_id', '=', shopId)
    .executeTakeFirst();
  if (!row) return undefined;
  return {
    ...toSettings(row),
    shopId,
    shopName: row.shop_name,
    timeZone: row.timezone,
    password: row.smtp_password_sealed === null ? null : secrets.open(row.smtp_password_sealed, passwordContext(shopId)),
    templates: await shopTemplates(db, shopId),
  };
}
