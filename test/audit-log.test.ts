import { randomBytes } from 'node:crypto';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MAX_ATTEMPTS } from '../src/domain/kernel/scheduling.js';
import { cliDatabase, movableClock, startTestApp, type TestApp } from './helpers.js';
import { member, PASSWORD, staffGraphql } from './staff-helpers.js';
import { until as eventually } from './live-helpers.js';
import { connectedShop } from './shopify-sync-helpers.js';
import { createShopifyAdminStandIn, type ShopifyAdminStandIn } from './support/shopify-admin.js';
import { type Receiver, startReceiver } from './webhook-receiver.js';

/**
 * Issue 35, item 4: the audit log (docs/console.md "Audit log"). Every change by a person or an
 * API key writes a row in the change's own transaction: who, when, what, before and after
 * (never a secret); auditLog filters and pages it (owners only); rows go after the shop's
 * auditRetentionDays, by the one scheduler, whichever instance runs it.
 */

const DAY = 86_400_000;

const LOG = `query($first: Int, $after: String, $actor: ID, $kind: String, $from: DateTime, $to: DateTime) {
  auditLog(first: $first, after: $after, actor: $actor, kind: $kind, from: $from, to: $to) {
    edges { cursor node { _id at actorKind actorId actorLabel kind subjectType subjectId before after } }
    pageInfo { hasNextPage endCursor }
  }
}`;

const RULE_CREATE = `mutation($input: EarningRuleCreateInput!) { earningRuleCreate(input: $input) { earningRule { _id } userErrors { code message } } }`;
const RULE_UPDATE = `mutation($input: EarningRuleUpdateInput!) { earningRuleUpdate(input: $input) { earningRule { name earnPoint } userErrors { code message } } }`;
const POINTS_ADD = `mutation($input: PointsChangeInput!) { pointsAdd(input: $input) { activity { _id } userErrors { code message } } }`;

type Shop = { shopId: string; apiKey: string };
type Row = { _id: string; at: string; actorKind: string; actorId: string; actorLabel: string; kind: string; subjectType: string | null; subjectId: string | null; before: any; after: any };

/** The whole log (every page) as a key reads it, newest first. */
async function log(t: TestApp, shop: Shop, filter: Record<string, unknown> = {}, first = 250): Promise<Row[]> {
  const rows: Row[] = [];
  let after: string | null = null;
  do {
    const res = await t.graphql(shop.apiKey, LOG, { ...filter, first, after });
    expect(res.errors, JSON.stringify(res.errors)).toBeUndefined();
    rows.push(...res.data.auditLog.edges.map((e: { node: Row }) => e.node));
    after = res.data.auditLog.pageInfo.hasNextPage ? res.data.auditLog.pageInfo.endCursor : null;
  } while (after);
  return rows;
}

async function createRule(t: TestApp, shop: Shop, name: string): Promise<string> {
  const res = await t.graphql(shop.apiKey, RULE_CREATE, { input: { type: 'custom', name, earnPoint: 5, action: name.toLowerCase().replaceAll(' ', '-'), actionLimit: 'unlimited' } });
  expect(res.data.earningRuleCreate.userErrors).toEqual([]);
  return res.data.earningRuleCreate.earningRule._id;
}

/** The key's id as the log names it (its actorId). */
async function keyId(t: TestApp, shop: Shop): Promise<string> {
  const prefix = shop.apiKey.split('_')[1]!;
  return (await t.app.database.db.selectFrom('api_keys').select('id').where('prefix', '=', prefix).executeTakeFirstOrThrow()).id;
}

describe('the audit log', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp({ SECRETS_KEY: randomBytes(32).toString('hex'), RATE_LIMIT_PER_MINUTE: '100000' }, {
      // The webhook URL check's DNS: one public address.
      resolveHost: async () => [{ address: '93.184.216.34', family: 4 }],
    });
  });
  afterAll(() => t?.stop());

  it('records who, what, before and after of a key\'s change; a failing change leaves no row', async () => {
    const shop = await t.shop('Audit basics');
    const ruleId = await createRule(t, shop, 'Review');
    const updated = await t.graphql(shop.apiKey, RULE_UPDATE, { input: { id: ruleId, name: 'Product review', earnPoint: 7 } });
    expect(updated.data.earningRuleUpdate.userErrors).toEqual([]);
    // Refused by validation, and by the rule (no such customer): nothing changed, nothing recorded.
    expect((await t.graphql(shop.apiKey, RULE_UPDATE, { input: { id: ruleId, earnPoint: 0 } })).data.earningRuleUpdate.userErrors).not.toEqual([]);
    expect((await t.graphql(shop.apiKey, POINTS_ADD, { input: { customerIdentifier: 'nobody', amount: 5 } })).data.pointsAdd.userErrors[0].code).toBe('customer_not_found');

    const rows = await log(t, shop);
    expect(rows.map((r) => r.kind)).toEqual(['earningRule.update', 'earningRule.create']);
    const [update] = rows;
    expect(update).toMatchObject({
      actorKind: 'api_key',
      actorId: await keyId(t, shop),
      actorLabel: `lk_${shop.apiKey.split('_')[1]}`,
      subjectType: 'earningRule',
      subjectId: ruleId,
      before: { name: 'Review', earnPoint: 5 },
      after: { name: 'Product review', earnPoint: 7 },
    });
    expect(Math.abs(Date.parse(update!.at) - Date.now())).toBeLessThan(60_000);
  });

  it('a change and its row commit or roll back together: when the row cannot be written, the change is undone', async () => {
    const shop = await t.shop('Audit atomic');
    const ruleId = await createRule(t, shop, 'Atomic');
    await t.customer(shop.shopId, 'atom', 10);
    const db = t.app.database.db;
    // The database refuses this shop's next audit rows, after the change's own statements ran.
    await sql`create or replace function audit_refuse() returns trigger language plpgsql as $$
      begin raise exception 'audit refused'; end $$`.execute(db);
    await sql.raw(`create trigger audit_refuse before insert on audit_log for each row when (new.shop_id = '${shop.shopId}') execute function audit_refuse()`).execute(db);
    try {
      const rule = await t.graphql(shop.apiKey, RULE_UPDATE, { input: { id: ruleId, name: 'Never' } });
      expect(rule.errors?.[0]?.extensions?.code ?? rule.data?.earningRuleUpdate?.userErrors?.[0]?.code).toBeTruthy();
      const points = await t.post('/rest-api/v1/points/add', { customerIdentifier: 'atom', amount: 5 }, shop.apiKey);
      expect(points.status).toBe(500);
    } finally {
      await sql`drop trigger audit_refuse on audit_log`.execute(db);
    }
    const rules = await t.graphql(shop.apiKey, '{ earningRules { _id name } }');
    expect(rules.data.earningRules.find((r: { _id: string }) => r._id === ruleId).name).toBe('Atomic');
    const customer = await db.selectFrom('customers').select('points').where('shop_id', '=', shop.shopId).where('shopify_customer_id', '=', 'atom').executeTakeFirstOrThrow();
    expect(customer.points).toBe(10);
    expect((await log(t, shop)).map((r) => r.kind)).toEqual(['earningRule.create']);
  });

  it('filters by actor, kind and date, pages newest first, and names people and keys apart', async () => {
    const shop = await t.shop('Audit filters');
    const owner = await member(t, shop.shopId, 'owner-audit@example.com', 'owner');
    const manager = await member(t, shop.shopId, 'pm-audit@example.com', 'program_manager');
    await t.customer(shop.shopId, 'filtered', 0);
    const ruleId = await createRule(t, shop, 'Filters');
    const byPerson = await staffGraphql(t, manager, RULE_UPDATE, { input: { id: ruleId, name: 'By a person' } });
    expect(byPerson.body.data.earningRuleUpdate.userErrors).toEqual([]);
    const middle = new Date();
    await new Promise((resolve) => setTimeout(resolve, 5));
    for (let i = 0; i < 3; i++) {
      expect((await t.post('/rest-api/v1/points/add', { customerIdentifier: 'filtered', amount: 10 + i }, shop.apiKey)).status).toBe(200);
    }
    const settings = await staffGraphql(t, manager, `mutation { shopSettingsUpdate(input: { auditRetentionDays: 30 }) { settings { auditRetentionDays } userErrors { code } } }`);
    expect(settings.body.data.shopSettingsUpdate).toEqual({ settings: { auditRetentionDays: 30 }, userErrors: [] });

    const all = await log(t, shop);
    expect(all.map((r) => r.kind)).toEqual(['shopSettings.update', 'points.add', 'points.add', 'points.add', 'earningRule.update', 'earningRule.create']);
    expect(all[0]).toMatchObject({ actorKind: 'staff', actorId: manager.body.staff.id, actorLabel: 'pm-audit@example.com', before: { auditRetentionDays: 365 }, after: { auditRetentionDays: 30 } });
    expect(all[1]).toMatchObject({ actorKind: 'api_key', subjectType: 'customer', before: { points: 21 }, after: { points: 33 } });

    // Pages of two: the same rows, in order, each once.
    expect((await log(t, shop, {}, 2)).map((r) => r._id)).toEqual(all.map((r) => r._id));
    expect((await log(t, shop, { actor: manager.body.staff.id })).map((r) => r.kind)).toEqual(['shopSettings.update', 'earningRule.update']);
    expect((await log(t, shop, { actor: await keyId(t, shop) })).map((r) => r.kind)).toEqual(['points.add', 'points.add', 'points.add', 'earningRule.create']);
    expect((await log(t, shop, { kind: 'points.add' }, 2)).map((r) => r.after.points)).toEqual([33, 21, 10]);
    expect((await log(t, shop, { from: middle.toISOString() })).map((r) => r.kind)).toEqual(['shopSettings.update', 'points.add', 'points.add', 'points.add']);
    expect((await log(t, shop, { to: middle.toISOString() })).map((r) => r.kind)).toEqual(['earningRule.update', 'earningRule.create']);

    // Owners read it; a program manager may not (people's e-mails and keys are in it).
    const asOwner = await staffGraphql(t, owner, LOG, { first: 1 });
    expect(asOwner.body.data.auditLog.edges[0].node.kind).toBe('shopSettings.update');
    const asManager = await staffGraphql(t, manager, LOG, { first: 1 });
    expect(asManager.status).toBe(403);
    // Bad input is the client's: a 4xx-style error, never a 500.
    const bad = await t.graphql(shop.apiKey, LOG, { after: 'not-a-cursor' });
    expect(bad.errors[0].extensions.code).not.toBe('INTERNAL_SERVER_ERROR');
    const range = await t.graphql(shop.apiKey, `mutation { shopSettingsUpdate(input: { auditRetentionDays: 3 }) { userErrors { field code } } }`);
    expect(range.data.shopSettingsUpdate.userErrors[0].field).toEqual(['input', 'auditRetentionDays']);
  });

  it('one shop never sees another\'s rows', async () => {
    const a = await t.shop('Audit A');
    const b = await t.shop('Audit B');
    await createRule(t, a, 'Only A');
    expect(await log(t, b)).toEqual([]);
    const aKey = await keyId(t, a);
    expect(await log(t, b, { actor: aKey })).toEqual([]);
    expect((await log(t, a)).length).toBe(1);
  });

  it('keeps no secret: keys, webhook secrets, invite tokens and customer tokens stay out', async () => {
    const shop = await t.shop('Audit secrets');
    await t.customer(shop.shopId, 'secretive', 0);
    const key = await t.graphql(shop.apiKey, 'mutation { apiKeyCreate { key apiKey { prefix } } }');
    const hook = await t.graphql(shop.apiKey, `mutation { webhookSubscriptionCreate(input: { topic: "points/*", callbackUrl: "https://hooks.example.com/a" }) {
      webhookSubscription { id } signingSecret userErrors { message } } }`);
    expect(hook.errors, JSON.stringify(hook.errors)).toBeUndefined();
    expect(hook.data.webhookSubscriptionCreate.userErrors).toEqual([]);
    const rotated = await t.graphql(shop.apiKey, `mutation($id: ID!) { webhookSubscriptionRotateSecret(input: { id: $id, graceHours: 0 }) { signingSecret } }`, {
      id: hook.data.webhookSubscriptionCreate.webhookSubscription.id,
    });
    const invite = await t.graphql(shop.apiKey, `mutation { staffInvite(input: { email: "new@example.com", role: viewer }) { link userErrors { message } } }`);
    const token = await t.post('/rest-api/v1/customerAccessTokens', { customerIdentifier: 'secretive' }, shop.apiKey);
    const revoke = await t.post('/rest-api/v1/customerAccessTokens/revoke', { customerIdentifier: 'secretive' }, shop.apiKey);
    expect(revoke.status).toBe(200);
    const shopify = await t.graphql(shop.apiKey, `mutation { shopifySettingsUpdate(input: { shopDomain: "audit-secrets.myshopify.com", webhookSecret: "shpss_very_secret_value" }) { userErrors { message } } }`);
    expect(shopify.data.shopifySettingsUpdate.userErrors).toEqual([]);
    const mail = await t.graphql(shop.apiKey, `mutation { shopMailSettingsUpdate(input: { smtpHost: "smtp.example.com", smtpUser: "shop", smtpPassword: "smtp_very_secret_value" }) { userErrors { message } } }`);
    expect(mail.data.shopMailSettingsUpdate.userErrors).toEqual([]);

    const rows = await log(t, shop);
    expect(rows.map((r) => r.kind).sort()).toEqual(
      ['apiKey.create', 'customerAccessTokens.revoke', 'mailSettings.update', 'shopifySettings.update', 'staff.invite', 'webhookSubscription.create', 'webhookSubscription.rotateSecret'].sort(),
    );
    const text = JSON.stringify(rows);
    const secrets = [
      key.data.apiKeyCreate.key,
      key.data.apiKeyCreate.key.split('_')[2],
      hook.data.webhookSubscriptionCreate.signingSecret,
      rotated.data.webhookSubscriptionRotateSecret.signingSecret,
      new URL(invite.data.staffInvite.link).hash.replace('#token=', ''),
      (await token.json()).accessToken,
      'shpss_very_secret_value',
      'smtp_very_secret_value',
    ];
    for (const secret of secrets) {
      expect(secret.length).toBeGreaterThan(8);
      expect(text).not.toContain(secret);
    }
    const hashes = await t.app.database.db.selectFrom('api_keys').select('key_hash').where('shop_id', '=', shop.shopId).execute();
    for (const { key_hash } of hashes) expect(text).not.toContain(key_hash);
    expect(rows.find((r) => r.kind === 'shopifySettings.update')!.after).toEqual({ shopDomain: 'audit-secrets.myshopify.com', webhookSecretSet: true });
    expect(rows.find((r) => r.kind === 'mailSettings.update')).toMatchObject({
      before: { smtpHost: '', smtpUser: null, passwordSet: false },
      after: { smtpHost: 'smtp.example.com', smtpUser: 'shop', passwordSet: true, passwordChanged: true },
    });
  });

  it('many concurrent points changes by people and keys: every ledger entry has its audit row, and only those', async () => {
    const shop = await t.shop('Audit concurrency');
    const support = await member(t, shop.shopId, 'support-audit@example.com', 'support');
    const customers = ['c-1', 'c-2', 'c-3'];
    for (const c of customers) await t.customer(shop.shopId, c, 0);
    const requests = Array.from({ length: 60 }, (_, i) => {
      const customerIdentifier = customers[i % customers.length]!;
      if (i % 3 === 0) {
        return staffGraphql(t, support, POINTS_ADD, { input: { customerIdentifier, amount: 1 + i, note: 'goodwill' } }).then((r) => expect(r.body.data.pointsAdd.userErrors).toEqual([]));
      }
      const op = i % 3 === 1 ? 'add' : 'subtract';
      // Subtractions may be refused for the balance: then neither an entry nor a row.
      return t.post(`/rest-api/v1/points/${op}`, { customerIdentifier, amount: 1 + (i % 7) }, shop.apiKey).then((r) => expect([200, 422]).toContain(r.status));
    });
    await Promise.all(requests);

    const db = t.app.database.db;
    const entries = await db.selectFrom('activities').select(['id', 'customer_id', 'type', 'old_points', 'new_points']).where('shop_id', '=', shop.shopId).where('type', 'in', ['add_points', 'subtract_points']).execute();
    const rows = (await log(t, shop)).filter((r) => r.kind.startsWith('points.'));
    expect(rows.length).toBe(entries.length);
    const byActivity = new Map(rows.map((r) => [r.after.activity as string, r]));
    for (const e of entries) {
      const row = byActivity.get(e.id);
      expect(row, `the audit row of ${e.id}`).toBeDefined();
      expect(row).toMatchObject({ subjectId: e.customer_id, before: { points: e.old_points }, after: { points: e.new_points }, kind: e.type === 'add_points' ? 'points.add' : 'points.subtract' });
    }
    expect(rows.filter((r) => r.actorKind === 'staff').length).toBe(20);
    expect(rows.filter((r) => r.actorKind === 'staff').every((r) => r.actorLabel === 'support-audit@example.com' && r.after.note === 'goodwill')).toBe(true);
  });
});

describe('the audit log of connections, retries, replays, referrals, actions and redemptions', () => {
  let t: TestApp;
  let shopify: ShopifyAdminStandIn;
  let receiver: Receiver;
  beforeAll(async () => {
    shopify = await createShopifyAdminStandIn();
    receiver = await startReceiver();
    t = await startTestApp({ SECRETS_KEY: randomBytes(32).toString('hex'), RATE_LIMIT_PER_MINUTE: '100000', WEBHOOK_ALLOWED_HOSTS: 'localhost', SHOPIFY_ADMIN_BASE_URL: `${shopify.url}/stores/{shop}` });
  });
  afterAll(async () => {
    await t?.stop();
    await receiver?.close();
    await shopify?.close();
  });

  it('records each change once, by the person or key that made it, with its subject and no secret; repeats and the shop backend\'s redemptions record nothing', async () => {
    const shop = await t.shop('Audit gaps');
    const owner = await member(t, shop.shopId, 'owner-gaps@example.com', 'owner');
    const { rewardId } = await connectedShop(t.url, shopify, shop, 'audit-gaps');
    await createRule(t, shop, 'Review');
    await t.customer(shop.shopId, 'g-1', 500);
    const db = t.app.database.db;
    const customerId = async (id: string) => (await db.selectFrom('customers').select('id').where('shop_id', '=', shop.shopId).where('shopify_customer_id', '=', id).executeTakeFirstOrThrow()).id;
    const referrer = { id: await customerId('g-1') };
    const gql = async (query: string, input: Record<string, unknown>, by: 'key' | 'owner' = 'key') => {
      const res = by === 'key' ? await t.graphql(shop.apiKey, query, { input }) : (await staffGraphql(t, owner, query, { input })).body;
      expect(res.errors, JSON.stringify(res.errors)).toBeUndefined();
      const payload = Object.values(res.data)[0] as { userErrors: unknown[] };
      expect(payload.userErrors).toEqual([]);
      return payload as any;
    };

    // A referral code created once (asking again changes nothing), by GraphQL and by GET /referral.
    const CODE = 'mutation($input: ReferralCodeCreateInput!) { referralCodeCreate(input: $input) { referralCode userErrors { code } } }';
    const { referralCode } = await gql(CODE, { customerIdentifier: 'g-1' });
    await gql(CODE, { customerIdentifier: 'g-1' });
    await t.customer(shop.shopId, 'g-2', 0);
    const rest = await fetch(`${t.url}/rest-api/v1/referral?customerIdentifier=g-2`, { headers: { authorization: `Bearer ${shop.apiKey}` } });
    expect(rest.status).toBe(200);
    const REGISTER = 'mutation($input: ReferralRegisterInput!) { referralRegister(input: $input) { referee { id } customer { _id } userErrors { code } } }';
    const registered = await gql(REGISTER, { referralCode, customer: { shopifyCustomerId: 'g-3', email: 'g-3@example.com' } }, 'owner');
    await gql(REGISTER, { referralCode, customer: { shopifyCustomerId: 'g-3', email: 'g-3@example.com' } }, 'owner');

    // Actions by GraphQL and REST; a reference reported again changes nothing.
    const ACTION = 'mutation($input: ActionReportInput!) { actionReport(input: $input) { created activity { _id } userErrors { code } } }';
    await gql(ACTION, { customerIdentifier: 'g-1', action: 'review', reference: 'rev-1' });
    expect((await gql(ACTION, { customerIdentifier: 'g-1', action: 'review', reference: 'rev-1' })).created).toBe(false);
    expect((await t.post('/rest-api/v1/actions', { customerIdentifier: 'g-1', action: 'review', reference: 'rev-2' }, shop.apiKey)).status).toBe(201);

    // A person's redemption in the admin schema; the shop's backend's (REST) stays a machine feed.
    const REDEEM = 'mutation($input: PointsRedeemInput!) { pointsRedeem(input: $input) { discountCode { code } userErrors { code } } }';
    const redeemed = await gql(REDEEM, { customerIdentifier: 'g-1', rewardId, pointsAmount: 100 }, 'owner');
    expect((await t.post('/rest-api/v1/pointsRedemptions', { customerIdentifier: 'g-1', rewardId, pointsAmount: 100 }, shop.apiKey)).status).toBe(200);

    // A delivery replayed by the key (REST) and by a person (GraphQL).
    const sub = await t.post('/rest-api/v1/webhooks/subscriptions', { topic: 'points/*', callbackUrl: receiver.url }, shop.apiKey);
    expect(sub.status).toBe(201);
    expect((await t.post('/rest-api/v1/points/add', { customerIdentifier: 'g-2', amount: 5 }, shop.apiKey)).status).toBe(200);
    let deliveryId = '';
    await eventually(async () => {
      deliveryId = (await db.selectFrom('webhook_deliveries').select('id').where('shop_id', '=', shop.shopId).executeTakeFirst())?.id ?? '';
      return deliveryId !== '';
    }, 10_000, 'a delivery');
    expect((await t.post(`/rest-api/v1/webhooks/deliveries/${deliveryId}/replay`, {}, shop.apiKey)).status).toBe(202);
    await gql('mutation($input: WebhookDeliveryReplayInput!) { webhookDeliveryReplay(input: $input) { webhookDelivery { id } userErrors { code } } }', { id: deliveryId }, 'owner');

    // A Shopify webhook set aside after its last try, tried again by a person.
    const now = new Date();
    await db.transaction().execute(async (trx) => {
      await trx.insertInto('shopify_inbox').values({ id: 'inbox_audit_gaps', shop_id: shop.shopId, webhook_id: 'audit-gaps-1', topic: 'customers/update', body: JSON.stringify({ id: 1, email: 'g-1@example.com' }), received_at: now, next_attempt_at: now }).execute();
      await trx.insertInto('due_work_failures').values({ kind: 'shopify_inbox', item: 'inbox_audit_gaps', shop_id: shop.shopId, attempts: MAX_ATTEMPTS, reason: 'test', first_failed_at: now, last_failed_at: now, next_attempt_at: now, set_aside_at: now }).execute();
    });
    await gql('mutation($input: ShopifyWebhookRetryInput!) { shopifyWebhookRetry(input: $input) { shopifyWebhook { status } userErrors { code } } }', { id: 'inbox_audit_gaps' }, 'owner');

    // One's own password, then the store disconnected.
    const NEW_PASSWORD = 'a new password for the audit';
    await gql('mutation($input: StaffPasswordChangeInput!) { staffPasswordChange(input: $input) { changed userErrors { code } } }', { currentPassword: PASSWORD, newPassword: NEW_PASSWORD }, 'owner');
    expect((await staffGraphql(t, owner, 'mutation { shopifyAdminDisconnect { disconnected userErrors { code } } }')).body.data.shopifyAdminDisconnect).toEqual({ disconnected: true, userErrors: [] });

    const key = { actorKind: 'api_key', actorId: await keyId(t, shop) };
    const person = { actorKind: 'staff', actorId: owner.body.staff.id, actorLabel: 'owner-gaps@example.com' };
    const KINDS = ['shopifyAdmin.connect', 'referralCode.create', 'referral.register', 'action.report', 'points.redeem', 'webhookDelivery.replay', 'shopifyWebhook.retry', 'staff.passwordChange', 'shopifyAdmin.disconnect'];
    const rows = (await log(t, shop)).filter((r) => KINDS.includes(r.kind)).reverse();
    const g2 = { id: await customerId('g-2') };
    const scopes = expect.arrayContaining(['write_discounts']);
    expect(rows).toEqual([
      expect.objectContaining({ ...key, kind: 'shopifyAdmin.connect', subjectType: 'shop', subjectId: shop.shopId, before: null, after: { auth: 'access_token', clientId: null, scopes } }),
      expect.objectContaining({ ...key, kind: 'referralCode.create', subjectType: 'customer', subjectId: referrer.id, after: { referralCode } }),
      expect.objectContaining({ ...key, kind: 'referralCode.create', subjectType: 'customer', subjectId: g2.id }),
      expect.objectContaining({ ...person, kind: 'referral.register', subjectType: 'customer', subjectId: registered.customer._id, after: { referralCode, referrer: referrer.id } }),
      expect.objectContaining({ ...key, kind: 'action.report', subjectId: referrer.id, after: expect.objectContaining({ action: 'review', reference: 'rev-1' }) }),
      expect.objectContaining({ ...key, kind: 'action.report', after: expect.objectContaining({ reference: 'rev-2' }) }),
      expect.objectContaining({ ...person, kind: 'points.redeem', subjectId: referrer.id, after: expect.objectContaining({ code: redeemed.discountCode.code, rewardId }) }),
      expect.objectContaining({ ...key, kind: 'webhookDelivery.replay', subjectType: 'webhookDelivery', subjectId: deliveryId }),
      expect.objectContaining({ ...person, kind: 'webhookDelivery.replay', subjectId: deliveryId }),
      expect.objectContaining({ ...person, kind: 'shopifyWebhook.retry', subjectType: 'shopifyWebhook', subjectId: 'inbox_audit_gaps', before: { status: 'failed' } }),
      expect.objectContaining({ ...person, kind: 'staff.passwordChange', subjectType: 'staff', subjectId: owner.body.staff.id }),
      expect.objectContaining({ ...person, kind: 'shopifyAdmin.disconnect', subjectType: 'shop', before: { auth: 'access_token', clientId: null, scopes }, after: null }),
    ]);
    // Each balance change as its ledger entry has it: the rule's 5 points, the reward's 100.
    const moved = (r: Row) => r.after.points - r.before.points;
    expect(rows.filter((r) => r.kind === 'action.report').map(moved)).toEqual([5, 5]);
    expect(moved(rows.find((r) => r.kind === 'points.redeem')!)).toBe(-100);
    const text = JSON.stringify(rows);
    for (const secret of [PASSWORD, NEW_PASSWORD, 'shpss_test_secret_123']) expect(text).not.toContain(secret);
  }, 60_000);
});

describe('retention', () => {
  it('a shop whose purge fails is set aside alone: the others\' rows still go', async () => {
    const clock = movableClock();
    const t = await startTestApp({ WORKER: 'off' }, { clock: clock.now });
    try {
      const failing = await t.shop('Failing purge');
      const fine = await t.shop('Fine purge');
      for (const shop of [failing, fine]) {
        await createRule(t, shop, 'Soon gone');
        expect((await t.graphql(shop.apiKey, 'mutation { shopSettingsUpdate(input: { auditRetentionDays: 7 }) { userErrors { code } } }')).data.shopSettingsUpdate.userErrors).toEqual([]);
      }
      const db = t.app.database.db;
      await sql`create or replace function audit_keep() returns trigger language plpgsql as $$
        begin raise exception 'this shop''s rows cannot go'; end $$`.execute(db);
      await sql.raw(`create trigger audit_keep before delete on audit_log for each row when (old.shop_id = '${failing.shopId}') execute function audit_keep()`).execute(db);
      clock.moveTo(new Date(Date.now() + 8 * DAY));
      await t.app.scheduler.runDue();
      expect(await log(t, fine)).toEqual([]);
      expect((await log(t, failing)).length).toBe(2);
      const failure = await db.selectFrom('due_work_failures').select(['item', 'reason']).where('kind', '=', 'audit_purge').execute();
      expect(failure).toEqual([{ item: failing.shopId, reason: expect.stringContaining('cannot go') }]);
      await sql`drop trigger audit_keep on audit_log`.execute(db);
    } finally {
      await t.stop();
    }
  }, 120_000);

  it('rows older than the shop\'s days go, by the scheduler after a restart; other shops keep theirs', async () => {
    // One database for both starts: an embedded one in a folder, or a private PostgreSQL schema.
    const { env, drop } = await cliDatabase('loyalty-audit-');
    const clock = movableClock();
    try {
      const first = await startTestApp({ ...env, WORKER: 'off' }, { clock: clock.now });
      const short = await first.shop('Short memory');
      const long = await first.shop('Long memory');
      for (const shop of [short, long]) await createRule(first, shop, 'Kept a while');
      expect((await first.graphql(short.apiKey, 'mutation { shopSettingsUpdate(input: { auditRetentionDays: 7 }) { userErrors { code } } }')).data.shopSettingsUpdate.userErrors).toEqual([]);
      // Six days on, nothing is due yet.
      clock.moveTo(new Date(Date.now() + 6 * DAY));
      await first.app.scheduler.runDue();
      expect((await first.app.scheduler.lag()).audit_purge).toBe(0);
      expect((await log(first, short)).length).toBe(2);
      await first.stop();

      clock.moveTo(new Date(Date.now() + 8 * DAY));
      // Started with its worker on: the purge is its first pass's.
      const second = await startTestApp(env, { clock: clock.now });
      try {
        await eventually(async () => (await log(second, short)).length === 0, 10_000, 'the short shop\'s rows purged');
        expect((await log(second, long)).map((r) => r.kind)).toEqual(['earningRule.create']);
        expect((await second.app.scheduler.lag()).audit_purge).toBe(0);
      } finally {
        await second.stop();
      }
    } finally {
      await drop();
    }
  }, 120_000);
});
