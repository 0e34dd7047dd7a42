import { randomBytes } from 'node:crypto';
import { sql } from 'kysely';
import { z } from 'zod';
import type { DB } from '../../db/database.js';
import type { WebhookSubscriptionRow, WebhookSubscriptionStatus } from '../../db/schema.js';
import { inTransaction, type Queryable, type Trx } from '../../db/transaction.js';
import { type Actor, changedFields, recordAudit } from '../audit/index.js';
import { beforeTimeCursor, ConflictError, encodeTimeCursor, EVENT_TOPICS, isId, newId, NotFoundError, type Page, type PageArgs, parseInput, type SecretBox, ValidationError } from '../kernel/index.js';
import { cancelSubscriptionDeliveries, resumeSubscriptionDeliveries } from './webhook-deliveries.js';

/** What the SSRF policy says of a callback URL. */
export type UrlVerdict = { ok: true; url: URL } | { ok: false; reason: string };

const MAX_CALLBACK_URL_LENGTH = 2048;

export type WebhookSubscriptionDeps = {
  db: DB;
  /** The SSRF policy (src/webhooks/url-policy.ts), injected so tests can resolve names their way. */
  urlPolicy: { checkCallbackUrl(url: string): Promise<UrlVerdict> };
  secrets: SecretBox;
};

/** The contract's subscription record. The signing secret is never part of it (see WithSecret). */
export type WebhookSubscription = {
  id: string;
  topic: string;
  callbackUrl: string;
  previousSecretValidUntil: Date | null;
  /**
   * Endpoint health (docs/webhooks.md): `enabled`; `probing` (after consecutive failures, one
   * attempt at a time until a success); `disabled` (failing for days: nothing is attempted, the
   * deliveries are kept until the URL is updated or the subscription re-enabled).
   */
  status: WebhookSubscriptionStatus;
  /** Why it was disabled; null unless disabled. */
  disabledReason: string | null;
  createdAt: Date;
  updatedAt: Date;
};

/** Only the create and rotate responses carry the secret, once. */
export type WebhookSubscriptionWithSecret = WebhookSubscription & { signingSecret: string };

const HOUR_MS = 60 * 60 * 1000;
/** Current plus rotated-out secrets a subscription keeps at most, so the signature header stays small. */
const MAX_VALID_SECRETS = 10;

const TOPIC_GROUPS = new Set(Object.keys(EVENT_TOPICS).map((topic) => topic.split('/')[0]));

/** A catalog topic, or `<group>/*` for a group the catalog has. */
export function isSubscribableTopic(topic: string): boolean {
  if (Object.hasOwn(EVENT_TOPICS, topic)) return true;
  const wildcard = /^([a-z_]+)\/\*$/.exec(topic);
  return wildcard !== null && TOPIC_GROUPS.has(wildcard[1]!);
}

export function listWebhookTopics(): Array<{ topic: string; description: string }> {
  return Object.entries(EVENT_TOPICS).map(([topic, description]) => ({ topic, description }));
}

const topicSchema = z
  .string()
  .trim()
  .max(100)
  .refine(isSubscribableTopic, 'unknown topic: use one from GET /webhooks/topics, or <group>/*');
const callbackUrlSchema = z.string().trim().min(1).max(MAX_CALLBACK_URL_LENGTH);

export const webhookSubscriptionCreateSchema = z.strictObject({ topic: topicSchema, callbackUrl: callbackUrlSchema });
// URL only: changing the topic takes a delete and a create (contract).
export const webhookSubscriptionUpdateSchema = z.strictObject({ callbackUrl: callbackUrlSchema });
export const secretRotationSchema = z.strictObject({ graceHours: z.number().int().min(0).max(24).default(24) });

export function toWebhookSubscription(row: WebhookSubscriptionRow): WebhookSubscription {
  return {
    id: row.id,
    topic: row.topic,
    callbackUrl: row.callback_url,
    previousSecretValidUntil: row.previous_secret_valid_until,
    status: row.status,
    disabledReason: row.disabled_reason,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
  };
}

/** 32 random bytes as 64 lowercase hex characters; the HMAC key is these characters' UTF-8 bytes. */
function newSigningSecret(): string {
  return randomBytes(32).toString('hex');
}

function subscriptionId(id: string): string {
  if (!isId(id)) throw new ValidationError('id: not a webhook subscription id', [{ path: 'id', message: 'malformed id' }]);
  return id;
}

function subscriptionNotFound(id: string) {
  return new NotFoundError('subscription_not_found', `this shop has no webhook subscription ${id}`, ['id']);
}

/** The URL as it will be stored (WHATWG-normalised), or a 400 saying why it is refused. */
async function checkedCallbackUrl(deps: WebhookSubscriptionDeps, raw: string): Promise<string> {
  const verdict = await deps.urlPolicy.checkCallbackUrl(raw);
  if (!verdict.ok) throw new ValidationError(verdict.reason, [{ path: 'callbackUrl', message: verdict.reason }]);
  return verdict.url.href;
}

function translateDuplicate(err: unknown): unknown {
  const e = err as { code?: string; constraint?: string; message?: string };
  if (e?.code === '23505' && `${e.constraint ?? ''} ${e.message ?? ''}`.includes('webhook_subscriptions_shop_topic_url_key')) {
    return new ConflictError('subscription_exists', 'this shop already has a subscription with that topic and callbackUrl', ['callbackUrl']);
  }
  return err;
}

async function insertSecret(trx: Trx, box: SecretBox, subscriptionId: string, secret: string, now: Date): Promise<void> {
  await trx
    .insertInto('webhook_secrets')
    .values({ id: newId(), subscription_id: subscriptionId, sealed_secret: box.seal(secret, subscriptionId), created_at: now, expires_at: null })
    .execute();
}

export async function createSubscription(
  deps: WebhookSubscriptionDeps,
  shopId: string,
  input: unknown,
  actor?: Actor,
): Promise<WebhookSubscriptionWithSecret> {
  const data = parseInput(webhookSubscriptionCreateSchema, input);
  const callbackUrl = await checkedCallbackUrl(deps, data.callbackUrl);
  const signingSecret = newSigningSecret();
  try {
    return await inTransaction(deps.db, async (trx) => {
      const now = new Date();
      const row = await trx
        .insertInto('webhook_subscriptions')
        .values({ id: newId(), shop_id: shopId, topic: data.topic, callback_url: callbackUrl, previous_secret_valid_until: null, created_at: now, updated_at: now })
        .returningAll()
        .executeTakeFirstOrThrow();
      await insertSecret(trx, deps.secrets, row.id, signingSecret, now);
      const subscription = toWebhookSubscription(row);
      await recordAudit(trx, shopId, actor, { kind: 'webhookSubscription.create', subject: { type: 'webhookSubscription', id: row.id }, after: subscription }, now);
      return { ...subscription, signingSecret };
    });
  } catch (err) {
    throw translateDuplicate(err);
  }
}

/** The shop's subscriptions, newest first; all of them unless `args` asks for a page. */
export async function listSubscriptions(db: Queryable, shopId: string, args?: PageArgs): Promise<Page<WebhookSubscription>> {
  let query = db.selectFrom('webhook_subscriptions').selectAll().where('shop_id', '=', shopId);
  if (args?.after) query = query.where(beforeTimeCursor(args.after));
  query = query.orderBy('created_at', 'desc').orderBy('id', 'desc');
  const rows = await (args ? query.limit(args.first + 1) : query).execute();
  const items = rows.slice(0, args?.first ?? rows.length).map((row) => ({
    node: toWebhookSubscription(row),
    cursor: encodeTimeCursor(row),
  }));
  return { items, hasNextPage: rows.length > items.length };
}

/** Changes the callback URL; the topic and the secrets stay. A probing or disabled endpoint resumes. */
export async function updateSubscription(
  deps: WebhookSubscriptionDeps,
  shopId: string,
  id: string,
  input: unknown,
  actor?: Actor,
): Promise<WebhookSubscription> {
  subscriptionId(id);
  const data = parseInput(webhookSubscriptionUpdateSchema, input);
  const callbackUrl = await checkedCallbackUrl(deps, data.callbackUrl);
  try {
    return await resume(deps.db, shopId, id, { callback_url: callbackUrl }, { actor, kind: 'webhookSubscription.update' });
  } catch (err) {
    throw translateDuplicate(err);
  }
}

/** Re-enables a disabled (or probing) endpoint: what it held is due again at once. */
export async function enableSubscription(db: DB, shopId: string, id: string, actor?: Actor): Promise<WebhookSubscription> {
  subscriptionId(id);
  return resume(db, shopId, id, {}, { actor, kind: 'webhookSubscription.enable' });
}

/**
 * Sets the subscription healthy (enabled, no failures counted), with `changes`; if it was probing
 * or disabled, the deliveries it held become due at once.
 */
async function resume(db: DB, shopId: string, id: string, changes: { callback_url?: string }, audit: { actor: Actor | undefined; kind: string }): Promise<WebhookSubscription> {
  return inTransaction(db, async (trx) => {
    const before = await trx
      .selectFrom('webhook_subscriptions')
      .selectAll()
      .where('id', '=', id)
      .where('shop_id', '=', shopId)
      .forUpdate()
      .executeTakeFirst();
    if (!before) throw subscriptionNotFound(id);
    const now = new Date();
    const row = await trx
      .updateTable('webhook_subscriptions')
      .set({ ...changes, status: 'enabled', consecutive_failures: 0, failing_since: null, disabled_reason: null, updated_at: now })
      .where('id', '=', id)
      .returningAll()
      .executeTakeFirstOrThrow();
    if (before.status !== 'enabled') await resumeSubscriptionDeliveries(trx, shopId, id, now);
    const subscription = toWebhookSubscription(row);
    await recordAudit(trx, shopId, audit.actor, { kind: audit.kind, subject: { type: 'webhookSubscription', id }, ...changedFields(toWebhookSubscription(before), subscription) }, now);
    return subscription;
  });
}

/**
 * Issues a new signing secret. Every secret accepted until now stays accepted for at most
 * `graceHours` more (its own expiry if sooner), so grace 0 revokes them all at once; the new one
 * is returned, once, and `previousSecretValidUntil` says when the old ones stop being accepted.
 */
export async function rotateSigningSecret(
  deps: WebhookSubscriptionDeps,
  shopId: string,
  id: string,
  input: unknown,
  actor?: Actor,
): Promise<WebhookSubscriptionWithSecret> {
  subscriptionId(id);
  // No body is no options; a body of `null` is not an object, and refused like any other.
  const { graceHours } = parseInput(secretRotationSchema, input === undefined ? {} : input);
  const signingSecret = newSigningSecret();
  return inTransaction(deps.db, async (trx) => {
    const found = await trx
      .selectFrom('webhook_subscriptions')
      .select('id')
      .where('id', '=', id)
      .where('shop_id', '=', shopId)
      .forUpdate()
      .executeTakeFirst();
    if (!found) throw subscriptionNotFound(id);
    const now = new Date();
    const validUntil = new Date(now.getTime() + graceHours * HOUR_MS);
    await trx
      .updateTable('webhook_secrets')
      .set({ expires_at: validUntil })
      .where('subscription_id', '=', id)
      .where((eb) => eb.or([eb('expires_at', 'is', null), eb('expires_at', '>', validUntil)]))
      .execute();
    await trx.deleteFrom('webhook_secrets').where('subscription_id', '=', id).where('expires_at', '<=', now).execute();
    await insertSecret(trx, deps.secrets, id, signingSecret, now);
    const keep = newestSecrets(trx, id).select('id').limit(MAX_VALID_SECRETS);
    await trx.deleteFrom('webhook_secrets').where('subscription_id', '=', id).where('id', 'not in', keep).execute();
    const row = await trx
      .updateTable('webhook_subscriptions')
      .set({ previous_secret_valid_until: validUntil, updated_at: now })
      .where('id', '=', id)
      .returningAll()
      .executeTakeFirstOrThrow();
    // The secrets themselves never reach the log: only when the old ones stop being accepted.
    await recordAudit(trx, shopId, actor, { kind: 'webhookSubscription.rotateSecret', subject: { type: 'webhookSubscription', id }, after: { previousSecretValidUntil: validUntil } }, now);
    return { ...toWebhookSubscription(row), signingSecret };
  });
}

/** The current secret first, then rotated-out ones from newest to oldest. */
function newestSecrets(db: Queryable, subscriptionId: string) {
  return db
    .selectFrom('webhook_secrets')
    .where('subscription_id', '=', subscriptionId)
    .orderBy(sql`expires_at is null`, 'desc')
    .orderBy('created_at', 'desc')
    .orderBy('id', 'desc');
}

/**
 * Every secret a delivery is signed with at `now`: the current one and those still in their
 * grace period, newest first (one `v1,` signature each in `webhook-signature`).
 */
export async function validSigningSecrets(
  deps: Pick<WebhookSubscriptionDeps, 'db' | 'secrets'>,
  subscriptionId: string,
  now = new Date(),
): Promise<string[]> {
  const rows = await newestSecrets(deps.db, subscriptionId)
    .select('sealed_secret')
    .where((eb) => eb.or([eb('expires_at', 'is', null), eb('expires_at', '>', now)]))
    .execute();
  return rows.map((row) => deps.secrets.open(row.sealed_secret, subscriptionId));
}

/** Removes the subscription and its secrets and cancels what it still had to send; its delivery records stay. */
export async function deleteSubscription(db: DB, shopId: string, id: string, actor?: Actor): Promise<void> {
  subscriptionId(id);
  await inTransaction(db, async (trx) => {
    const row = await trx
      .deleteFrom('webhook_subscriptions')
      .where('id', '=', id)
      .where('shop_id', '=', shopId)
      .returningAll()
      .executeTakeFirst();
    if (!row) throw subscriptionNotFound(id);
    await cancelSubscriptionDeliveries(trx, shopId, id, new Date());
    await recordAudit(trx, shopId, actor, { kind: 'webhookSubscription.delete', subject: { type: 'webhookSubscription', id }, before: toWebhookSubscription(row) });
  });
}
