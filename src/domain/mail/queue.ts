import { sql } from 'kysely';
import type { MailMessageRow } from '../../db/schema.js';
import type { Queryable, Trx } from '../../db/transaction.js';
import { MAX_ATTEMPTS, newId, nextDay, RETRY_DELAYS_MS, shopPeriods, startOfShopDay } from '../kernel/index.js';
import type { MailKind } from './templates.js';

/**
 * The mail queue (issue 36, item 4) is `mail_messages`, worked like the Shopify sync jobs: the
 * outbox relay writes a row per (event, customer, kind) in its own transaction (unique, so a
 * second relay of the same event adds nothing), and a worker leases a shop's due rows (due_at
 * moved past the send's time-outs, FOR UPDATE SKIP LOCKED), sends them and records the outcome,
 * guarded by its lease. A worker killed mid-send leaves its rows to the next one when the lease
 * ends. Temporary failures are tried again with the due-work backoff (RETRY_DELAYS_MS), up to
 * MAX_ATTEMPTS.
 */

type QueuedEvent = { id: string; shopId: string; type: string; data: unknown; createdAt: Date };
type NewMessage = { shop_id: string; customer_id: string; kind: MailKind; source: string; data: Record<string, unknown>; due_at: Date };

type EventData = Record<string, unknown>;

/** The events that may call for an e-mail, each about the `customer` its data names. */
const MAIL_TOPICS = new Set(['redemptions/created', 'redemptions/expiring', 'points/earned', 'points/expiring', 'points/expired', 'points/added', 'tiers/changed']);

/** Whether an event may call for an e-mail: of points added, only a referral's reward (a batch of others costs the relay no query). */
function mayMail({ type, data }: QueuedEvent): boolean {
  const d = data as EventData | null;
  return MAIL_TOPICS.has(type) && typeof d?.customer === 'string' && (type !== 'points/added' || d.settingType === 'referral');
}

/** What a code's e-mails (reward issued, code expiring) keep of its event. */
const codeFields = ({ code, value, type, currency, expiresAt, pointsAmount }: EventData) => ({ code, value, type, currency, expiresAt, pointsAmount });

/** The referee's reward, as src/domain/rewards/referrals.ts describes it (the referrer's says "referred …"). */
const REFEREE_REWARD = /^Referral reward: signed up with code /;

/** The outbox relay's part: the e-mails its batch of events calls for, in shops that send them. */
export async function queueMail(trx: Trx, events: readonly QueuedEvent[], now: Date): Promise<void> {
  const wanted = events.filter(mayMail);
  if (wanted.length === 0) return;
  const shops = await trx
    .selectFrom('shop_mail_settings as m')
    .innerJoin('shops as s', 's.id', 'm.shop_id')
    .select(['m.shop_id', 'm.kinds', 's.timezone'])
    .where('m.shop_id', 'in', [...new Set(wanted.map((e) => e.shopId))])
    .where('m.enabled', '=', true)
    .execute();
  const sending = new Map(shops.map((s) => [s.shop_id, s]));
  const mailed = wanted.filter((e) => sending.has(e.shopId));
  const birthdays = await birthdayCredits(trx, mailed.filter((e) => e.type === 'points/earned' && sending.get(e.shopId)!.kinds.includes('birthday')));
  const tierChanges = await tierKinds(trx, mailed.filter((e) => e.type === 'tiers/changed'));
  // One e-mail per (event, customer, kind), due at once.
  const single: NewMessage[] = [];
  // Points earned: one e-mail per customer and shop day, summing the day's credits, sent after the day ends.
  const days = new Map<string, NewMessage & { data: { points: number; day: string } }>();
  for (const event of mailed) {
    const shop = sending.get(event.shopId)!;
    const data = event.data as EventData;
    const customer = data.customer as string;
    const mail = (kind: MailKind, fields: Record<string, unknown>) => {
      if (shop.kinds.includes(kind)) single.push({ shop_id: event.shopId, customer_id: customer, kind, source: event.id, data: fields, due_at: now });
    };
    // A ledger entry's change (points/earned, points/added, points/expired).
    const points = Number(data.newPoints) - Number(data.oldPoints);
    switch (event.type) {
      case 'redemptions/created':
        mail('reward_issued', codeFields(data));
        break;
      case 'redemptions/expiring':
        mail('code_expiring', codeFields(data));
        break;
      case 'points/expiring':
        mail('points_expiring', { points: data.points, expiresAt: data.expiresAt });
        break;
      case 'points/expired':
        if (points < 0) mail('points_expired', { points: -points, at: data.createdAt });
        break;
      case 'points/added':
        if (points > 0) mail('referral_reward', { points, referee: REFEREE_REWARD.test(String(data.description)) });
        break;
      case 'tiers/changed': {
        const kind = tierChanges.get(event.id);
        const nameOf = (tier: unknown) => (tier as { name?: string } | null)?.name ?? null;
        if (kind) mail(kind, { tier: nameOf(data.tier), previousTier: nameOf(data.previousTier) });
        break;
      }
      case 'points/earned': {
        // A birthday the shop tells in its own e-mail is left out of the day's sum: told once.
        if (birthdays.has(event.id)) {
          mail('birthday', { points });
          break;
        }
        if (!shop.kinds.includes('points_earned') || !(points > 0)) break;
        const day = shopPeriods(event.createdAt, shop.timezone).day;
        const source = `day:${day}`;
        const key = `${source} ${customer}`;
        const held = days.get(key);
        if (held) held.data.points += points;
        else days.set(key, { shop_id: event.shopId, customer_id: customer, kind: 'points_earned', source, data: { points, day }, due_at: startOfShopDay(nextDay(day), shop.timezone) });
      }
    }
  }
  if (single.length) {
    await trx
      .insertInto('mail_messages')
      .values(single.map((m) => ({ id: newId(), ...m, data: JSON.stringify(m.data), updated_at: now })))
      .onConflict((oc) => oc.columns(['source', 'customer_id', 'kind']).doNothing())
      .execute();
  }
  if (days.size) {
    // In customer order, so two relays adding to the same rows take their locks in one order.
    const rows = [...days.values()].sort((a, b) => a.customer_id.localeCompare(b.customer_id));
    await trx
      .insertInto('mail_messages')
      .values(rows.map((m) => ({ id: newId(), ...m, data: JSON.stringify(m.data), updated_at: now })))
      .onConflict((oc) =>
        oc.columns(['source', 'customer_id', 'kind']).doUpdateSet({
          data: sql`jsonb_set(mail_messages.data, '{points}', to_jsonb((mail_messages.data->>'points')::bigint + (excluded.data->>'points')::bigint))`,
          updated_at: now,
        }).where('mail_messages.status', '=', 'queued').where('mail_messages.attempts', '=', 0),
      )
      .execute();
  }
}

/**
 * The points/earned events that are a birthday rule's credit. The event names no rule, but the
 * birthday run records an award (rule_awards) beside each credit, with the rule as it was; the
 * credit's description is that rule's name and its points the award's.
 */
async function birthdayCredits(trx: Trx, events: readonly QueuedEvent[]): Promise<Set<string>> {
  const credits = events.filter((e) => (e.data as EventData).settingType === 'rule');
  if (credits.length === 0) return new Set();
  const awards = await trx
    .selectFrom('rule_awards as a')
    .innerJoin('earning_rules as r', 'r.id', 'a.rule_id')
    .select(['a.customer_id', 'a.points', sql<string>`a.rule_snapshot->>'name'`.as('name')])
    .where('a.customer_id', 'in', [...new Set(credits.map((e) => (e.data as EventData).customer as string))])
    .where('r.type', '=', 'birthday')
    .where('a.points', '>', 0)
    .execute();
  const key = (customer: unknown, points: unknown, name: unknown) => JSON.stringify([customer, Number(points), name]);
  const awarded = new Set(awards.map((a) => key(a.customer_id, a.points, a.name)));
  return new Set(
    credits.filter(({ data }) => {
      const d = data as EventData;
      return awarded.has(key(d.customer, Number(d.newPoints) - Number(d.oldPoints), d.description));
    }).map((e) => e.id),
  );
}

/**
 * Whether each tiers/changed event is a tier reached or one lost: the event names the tiers, their
 * thresholds say which is higher (no tier is below all). A change whose tier was deleted since is
 * neither, and sends nothing.
 */
async function tierKinds(trx: Trx, events: readonly QueuedEvent[]): Promise<Map<string, 'tier_reached' | 'tier_lost'>> {
  const idOf = (tier: unknown) => (tier as { id?: string } | null)?.id;
  const ids = [...new Set(events.flatMap(({ data }) => [idOf((data as EventData).tier), idOf((data as EventData).previousTier)]))].filter((id) => id !== undefined);
  const rows = ids.length ? await trx.selectFrom('tiers').select(['id', 'threshold']).where('id', 'in', ids).execute() : [];
  const thresholds = new Map(rows.map((r) => [r.id, Number(r.threshold)]));
  const level = (tier: unknown) => {
    const id = idOf(tier);
    return id === undefined ? Number.NEGATIVE_INFINITY : thresholds.get(id);
  };
  const kinds = new Map<string, 'tier_reached' | 'tier_lost'>();
  for (const { id, data } of events) {
    const from = level((data as EventData).previousTier);
    const to = level((data as EventData).tier);
    if (from === undefined || to === undefined || from === to) continue;
    kinds.set(id, to > from ? 'tier_reached' : 'tier_lost');
  }
  return kinds;
}

/**
 * Shops with mail due, the longest waiting first, leaving out `busy` (shops this worker serves
 * already): one lane per shop, so no shop's mail waits behind another's server.
 */
export async function shopsWithDueMail(db: Queryable, now: Date, busy: readonly string[], limit: number): Promise<string[]> {
  let query = db
    .selectFrom('mail_messages')
    .select(['shop_id', (eb) => eb.fn.min('due_at').as('first_due')])
    .where('due_at', 'is not', null)
    .where('due_at', '<=', now)
    .groupBy('shop_id');
  if (busy.length) query = query.where('shop_id', 'not in', busy);
  const rows = await query.orderBy('first_due').limit(limit).execute();
  return rows.map((r) => r.shop_id);
}

/** A leased message with what its e-mail needs: its customer's address and balance, and whether they may be mailed. */
export type ClaimedMail = MailMessageRow & {
  kind: MailKind;
  lease: Date;
  email: string;
  balance: number;
  unsubscribed: boolean;
  suppressed: boolean;
  /** The customer's own locale (mail_preferences), over the shop's. */
  locale: string | null;
  kinds_off: string[];
};

/** Leases up to `limit` of the shop's due messages for `leaseMs` (longer than a send may take), oldest first; each lease counts as a try. */
export async function claimMail(db: Queryable, shopId: string, now: Date, limit: number, leaseMs: number): Promise<ClaimedMail[]> {
  const lease = new Date(now.getTime() + leaseMs);
  const { rows } = await sql<Omit<ClaimedMail, 'lease'>>`
    with claimed as (
      update mail_messages set due_at = ${lease}, attempts = attempts + 1, updated_at = ${now}
      where id = any(array(
        select id from mail_messages
        where shop_id = ${shopId} and due_at is not null and due_at <= ${now}
        order by due_at limit ${limit} for update skip locked))
      returning *
    )
    select m.*, c.email, c.points as balance,
      coalesce(p.unsubscribed_at is not null, false) as unsubscribed, p.locale, coalesce(p.kinds_off, '{}') as kinds_off,
      exists (select 1 from mail_suppressions x where x.shop_id = m.shop_id and x.address = lower(c.email)) as suppressed
    from claimed m
    join customers c on c.id = m.customer_id
    left join mail_preferences p on p.customer_id = m.customer_id`.execute(db);
  return rows
    .map((r) => ({ ...r, kind: r.kind as MailKind, lease }))
    .sort((a, b) => a.created_at.getTime() - b.created_at.getTime() || a.id.localeCompare(b.id));
}

const leased = (claimed: ClaimedMail) => (q: Queryable) => q.updateTable('mail_messages').where('id', '=', claimed.id).where('due_at', '=', claimed.lease);

export type SentMail = { claimed: ClaimedMail; to: string; messageId: string; at: Date };

/** Sent: the server took them. One statement for a batch (the worker groups the sends that finish together). */
export async function recordMailsSent(db: Queryable, sent: readonly SentMail[]): Promise<void> {
  if (sent.length === 0) return;
  const rows = sent.map((s) => ({ id: s.claimed.id, lease: s.claimed.lease.toISOString(), to: s.to, message_id: s.messageId, at: s.at.toISOString() }));
  await sql`
    update mail_messages m set status = 'sent', due_at = null, to_address = x.to, message_id = x.message_id, sent_at = x.at, last_error = null, updated_at = x.at
    from jsonb_to_recordset(${JSON.stringify(rows)}::jsonb) as x(id text, lease timestamptz, "to" text, message_id text, at timestamptz)
    where m.id = x.id and m.due_at = x.lease`.execute(db);
}

/** Not sent, and never will be: the customer unsubscribed, their address is suppressed, or the shop stopped sending. */
export async function recordMailSkipped(db: Queryable, claimed: ClaimedMail, reason: string, now: Date): Promise<void> {
  await leased(claimed)(db).set({ status: 'skipped', due_at: null, attempts: sql`attempts - 1`, last_error: reason, updated_at: now }).execute();
}

/**
 * A try failed: due again after its backoff or, out of tries or refused for good (`permanent`),
 * kept as failed with the server's answer. Returns whether it failed for good.
 */
export async function recordMailFailed(db: Queryable, claimed: ClaimedMail, reason: string, now: Date, permanent: boolean): Promise<boolean> {
  const final = permanent || claimed.attempts >= MAX_ATTEMPTS;
  const delay = RETRY_DELAYS_MS[Math.min(claimed.attempts, RETRY_DELAYS_MS.length) - 1] ?? RETRY_DELAYS_MS[0];
  await leased(claimed)(db)
    .set(final
      ? { status: 'failed', due_at: null, last_error: reason.slice(0, 1000), updated_at: now }
      : { due_at: new Date(now.getTime() + delay), last_error: reason.slice(0, 1000), updated_at: now })
    .execute();
  return final;
}

/**
 * The server refused the recipient for good (a 5xx to RCPT TO): the address is suppressed for the
 * shop, visibly (mail_suppressions keeps the answer), and the message says so.
 */
export async function recordRecipientRefused(db: Queryable, claimed: ClaimedMail, address: string, reason: string, now: Date): Promise<void> {
  await db
    .insertInto('mail_suppressions')
    .values({ shop_id: claimed.shop_id, address: address.toLowerCase(), reason: reason.slice(0, 1000), created_at: now })
    .onConflict((oc) => oc.columns(['shop_id', 'address']).doNothing())
    .execute();
  await leased(claimed)(db).set({ status: 'suppressed', due_at: null, to_address: address, last_error: reason.slice(0, 1000), updated_at: now }).execute();
}

/** Puts claimed messages back, due at once, without counting the try (the worker is stopping, or the shop's settings could not be read). */
export async function returnMail(db: Queryable, claimed: ClaimedMail, dueAt: Date): Promise<void> {
  await leased(claimed)(db).set({ due_at: dueAt, attempts: sql`greatest(attempts - 1, 0)` }).execute();
}

export type MailSuppression = { address: string; reason: string; createdAt: Date };

/** The shop's suppressed addresses, newest first. */
export async function listMailSuppressions(db: Queryable, shopId: string, limit = 100): Promise<MailSuppression[]> {
  const rows = await db.selectFrom('mail_suppressions').selectAll().where('shop_id', '=', shopId).orderBy('created_at', 'desc').orderBy('address').limit(limit).execute();
  return rows.map((r) => ({ address: r.address, reason: r.reason, createdAt: r.created_at }));
}
