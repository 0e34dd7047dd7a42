import type { ParsedMail } from 'mailparser';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { shopPeriods, startOfShopDay } from '../src/domain/kernel/calendar.js';
import { MAIL_KINDS, type MailKind, setMailConsent } from '../src/domain/mail/index.js';
import { movableClock, startTestApp, type TestApp } from './helpers.js';
import { until } from './live-helpers.js';
import { mailingShop, messagesOf, PUBLIC_URL, rawHeader, redeem, requeue, settled } from './mail-helpers.js';
import { startSmtp, type TestSmtp } from './smtp-server.js';

/**
 * The e-mails of issue 36 besides the reward and the day's points: each from its event, through
 * the real flow that records it (expiry and code warnings, tiers, referrals, the birthday run), to
 * the in-process SMTP server. Each test has a shop sending the kinds it tests and one that switched
 * them off, an unsubscribed customer beside a subscribed one, and relays the events a second time.
 */
const DAY = 86_400_000;
const HOUR = 3_600_000;

type Shop = { shopId: string; apiKey: string; rewardId: string };

/** The sender name of the shops that switched the tested kinds off (the others send as mailingShop's "Rewards team"). */
const QUIET = 'Quiet team';

/** A shop-local day ('YYYY-MM-DD') as the e-mails write it. */
const longDate = (day: string) => new Intl.DateTimeFormat('en', { dateStyle: 'long', timeZone: 'UTC' }).format(new Date(`${day}T12:00:00Z`));

// Each test walks a whole flow (two shops, the clock days ahead, two rounds of due work): more than the default minute on a loaded machine.
describe('the other e-mails: expiry, codes, tiers, referrals, birthdays', { timeout: 120_000 }, () => {
  let smtp: TestSmtp;
  let t: TestApp;
  let clock: ReturnType<typeof movableClock>;

  beforeAll(async () => {
    smtp = await startSmtp();
  });
  afterAll(async () => {
    await smtp?.close();
  });
  // An app each: the tests move the clock days ahead.
  beforeEach(async () => {
    clock = movableClock();
    t = await startTestApp({ PUBLIC_URL }, { clock: clock.now });
  });
  afterEach(async () => {
    await t?.stop();
  });

  /** A shop sending `kinds` (and every other kind), and one sending every kind but those; both with `settings` (shopSettingsUpdate). */
  async function shopPair(name: string, kinds: MailKind[], settings: Record<string, unknown> = {}): Promise<{ on: Shop; off: Shop }> {
    const on = await mailingShop(t, smtp.port, name);
    const off = await mailingShop(t, smtp.port, `${name} (quiet)`, { kinds: MAIL_KINDS.filter((k) => !kinds.includes(k)), fromName: QUIET });
    for (const shop of [on, off]) {
      const res = await t.graphql(shop.apiKey, 'mutation($input: ShopSettingsInput!) { shopSettingsUpdate(input: $input) { userErrors { code field message } } }', { input: settings });
      expect(res.data.shopSettingsUpdate.userErrors).toEqual([]);
    }
    return { on, off };
  }

  async function customerId(shopId: string, shopifyCustomerId: string): Promise<string> {
    const row = await t.app.database.db.selectFrom('customers').select('id').where('shop_id', '=', shopId).where('shopify_customer_id', '=', shopifyCustomerId).executeTakeFirstOrThrow();
    return row.id;
  }

  async function unsubscribe(shopId: string, shopifyCustomerId: string): Promise<void> {
    await setMailConsent(t.app.database.db, shopId, await customerId(shopId, shopifyCustomerId), false, new Date());
  }

  const addPoints = async (shop: Shop, customerIdentifier: string, amount: number) =>
    expect((await t.post('/rest-api/v1/points/add', { customerIdentifier, amount }, shop.apiKey)).status).toBe(200);

  /**
   * The shop's e-mails of `kind`, once settled: exactly one per customer of `sent` (received by the
   * server once) and `skipped` (unsubscribed: never sent), and none more when the `topic` events are
   * relayed again. Returns the received e-mails by address, with their headers checked.
   */
  async function expectMail(shop: Shop, kind: MailKind, topic: string, sent: string[], skipped: string[] = []): Promise<Record<string, ParsedMail>> {
    const ofKind = async () => (await messagesOf(t, shop.shopId)).filter((r) => r.kind === kind);
    const count = sent.length + skipped.length;
    await until(async () => settled(await ofKind(), count), 30_000, `${count} ${kind} e-mails`);
    await requeue(t, shop.shopId, topic);
    const rows = await ofKind();
    expect(rows).toHaveLength(count);
    const received: Record<string, ParsedMail> = {};
    for (const id of sent) {
      const row = rows.find((r) => r.customer_id === idsByShopifyId.get(`${shop.shopId} ${id}`));
      expect(row).toMatchObject({ status: 'sent', attempts: 1, to_address: `${id}@example.com` });
      const mails = smtp.received.filter((m) => m.messageId === row!.message_id);
      expect(mails).toHaveLength(1);
      expect(rawHeader(mails[0]!, 'List-Unsubscribe')).toMatch(new RegExp(`^<${PUBLIC_URL}/mail/unsubscribe\\?token=`));
      expect(rawHeader(mails[0]!, 'List-Unsubscribe-Post')).toBe('List-Unsubscribe=One-Click');
      expect(mails[0]!.html).toContain('href="https://loyalty.example/mail/unsubscribe?token=');
      received[id] = mails[0]!;
    }
    for (const id of skipped) {
      const row = rows.find((r) => r.customer_id === idsByShopifyId.get(`${shop.shopId} ${id}`));
      expect(row).toMatchObject({ status: 'skipped', last_error: 'the customer unsubscribed', message_id: null });
      // Nothing at all from this shop: each test unsubscribes its customer before any e-mail.
      const to = (m: ParsedMail) => (m.to && !Array.isArray(m.to) ? m.to.value[0]?.address : undefined);
      expect(smtp.received.filter((m) => to(m) === `${id}@example.com` && m.from?.value[0]?.name !== QUIET)).toEqual([]);
    }
    return received;
  }

  /** The customers' ids, read as the tests name them ("shopId shopifyCustomerId"). */
  const idsByShopifyId = new Map<string, string>();
  async function remember(shop: Shop, ...ids: string[]): Promise<void> {
    for (const id of ids) idsByShopifyId.set(`${shop.shopId} ${id}`, await customerId(shop.shopId, id));
  }

  /** Every event of the shop relayed, and none queued an e-mail of `kinds`. */
  async function expectNone(shop: Shop, kinds: MailKind[]): Promise<void> {
    const db = t.app.database.db;
    await until(async () => (await db.selectFrom('outbox_events').select('id').where('shop_id', '=', shop.shopId).where('relayed_at', 'is', null).execute()).length === 0, 10_000, 'the events relayed');
    expect((await messagesOf(t, shop.shopId)).filter((r) => kinds.includes(r.kind as MailKind))).toEqual([]);
  }

  it('points expiring (their last day in the shop\'s zone), then expired', async () => {
    const zone = 'America/Los_Angeles';
    const { on, off } = await shopPair('Expiry', ['points_expiring', 'points_expired'], { timezone: zone, expiry: { mode: 'per_earn', days: 10, warningDays: 3 } });
    for (const shop of [on, off]) {
      for (const id of ['ann', 'ben']) {
        await t.customer(shop.shopId, id);
        await addPoints(shop, id, 100);
      }
      await remember(shop, 'ann', 'ben');
    }
    await unsubscribe(on.shopId, 'ben');
    const lot = await t.app.database.db.selectFrom('point_lots').select('expires_at').where('customer_id', '=', idsByShopifyId.get(`${on.shopId} ann`)!).executeTakeFirstOrThrow();
    const expires = lot.expires_at;

    clock.moveTo(new Date(expires.getTime() - 2 * DAY));
    await t.app.scheduler.runDue();
    await t.app.scheduler.runDue();
    const warned = await expectMail(on, 'points_expiring', 'points/expiring', ['ann'], ['ben']);
    // The start of the next day in Los Angeles is already that next day in UTC: the last day is the one before, there.
    const lastDay = longDate(shopPeriods(new Date(expires.getTime() - 1), zone).day);
    expect(lastDay).not.toBe(longDate(new Date(expires.getTime() - 1).toISOString().slice(0, 10)));
    expect(warned.ann!.subject).toBe('100 of your points at Expiry expire soon');
    expect(warned.ann!.text).toContain(`100 points of your balance expire after ${lastDay}. Spend them by then, or they are gone.`);
    expect(warned.ann!.text).toContain('Your balance is now 100 points.');
    expect(warned.ann!.html).toContain(`<strong>100 points</strong> of your balance expire after ${lastDay}.`);
    await expectNone(off, ['points_expiring']);

    clock.moveTo(new Date(expires.getTime() + HOUR));
    await t.app.scheduler.runDue();
    await t.app.scheduler.runDue();
    const expired = await expectMail(on, 'points_expired', 'points/expired', ['ann'], ['ben']);
    expect(expired.ann!.subject).toBe('100 of your points at Expiry expired');
    // The day its ledger entry says, in Los Angeles (the ledger writes the real time, not the test's clock).
    const entry = await t.app.database.db.selectFrom('activities').select('created_at').where('customer_id', '=', idsByShopifyId.get(`${on.shopId} ann`)!).where('type', '=', 'expire_points').executeTakeFirstOrThrow();
    expect(expired.ann!.text).toContain(`On ${longDate(shopPeriods(entry.created_at, zone).day)}, 100 points of your balance expired.`);
    expect(expired.ann!.text).toContain('Your balance is now 0 points.');
    await expectNone(off, ['points_expiring', 'points_expired']);
  });

  it('a code expiring unused: the code and its last day', async () => {
    const zone = 'America/Los_Angeles';
    const { on, off } = await shopPair('Codes', ['code_expiring'], { timezone: zone, codeWarningDays: 3 });
    const codes: Record<string, string> = {};
    for (const shop of [on, off]) {
      for (const id of ['cat', 'dan']) await t.customer(shop.shopId, id, 500);
      await remember(shop, 'cat', 'dan');
    }
    await unsubscribe(on.shopId, 'dan');
    for (const shop of [on, off]) for (const id of ['cat', 'dan']) codes[`${shop.shopId} ${id}`] = await redeem(t, shop, id);
    const code = codes[`${on.shopId} cat`]!;
    const row = await t.app.database.db.selectFrom('discount_codes').select('expires_at').where('code', '=', code).executeTakeFirstOrThrow();

    clock.moveTo(new Date(row.expires_at!.getTime() - 2 * DAY));
    await t.app.scheduler.runDue();
    await t.app.scheduler.runDue();
    const warned = await expectMail(on, 'code_expiring', 'redemptions/expiring', ['cat'], ['dan']);
    const lastDay = longDate(shopPeriods(row.expires_at!, zone).day);
    expect(warned.cat!.subject).toBe(`Your code ${code} at Codes expires on ${lastDay}`);
    expect(warned.cat!.text).toContain(`Your code for 5 off has not been used yet:\n\n    ${code}\n\nUse it once at checkout, until ${lastDay}.`);
    expect(warned.cat!.text).toContain('Your balance is now 400 points.');
    expect(warned.cat!.html).toContain(`<span style="white-space:nowrap">${code}</span>`);
    await expectNone(off, ['code_expiring']);
  });

  it('a tier reached, and lost', async () => {
    const { on, off } = await shopPair('Tiers <&>', ['tier_reached', 'tier_lost']);
    for (const shop of [on, off]) {
      const res = await t.graphql(
        shop.apiKey,
        `mutation {
          silver: tierCreate(input: { name: "Silver", threshold: "100", multiplier: "1.5" }) { userErrors { message } }
          gold: tierCreate(input: { name: "Gold", threshold: "300", multiplier: "2" }) { userErrors { message } }
        }`,
      );
      expect([res.data.silver.userErrors, res.data.gold.userErrors]).toEqual([[], []]);
      for (const id of ['eve', 'fin']) await t.customer(shop.shopId, id);
      await remember(shop, 'eve', 'fin');
    }
    await unsubscribe(on.shopId, 'fin');
    for (const shop of [on, off]) for (const id of ['eve', 'fin']) await addPoints(shop, id, 150);
    const reached = await expectMail(on, 'tier_reached', 'tiers/changed', ['eve'], ['fin']);
    expect(reached.eve!.subject).toBe('You reached Silver at Tiers <&>');
    expect(reached.eve!.text).toContain('Congratulations: you are now a Silver member.');
    expect(reached.eve!.html).toContain('Tiers &lt;&amp;&gt;');
    await expectNone(off, ['tier_reached']);

    // Staff set no tier for a week: Silver is lost.
    for (const shop of [on, off]) {
      for (const id of ['eve', 'fin']) {
        const res = await t.graphql(shop.apiKey, 'mutation($input: CustomerTierOverrideInput!) { customerTierOverride(input: $input) { userErrors { code field message } } }', {
          input: { customerIdentifier: id, tierId: null, until: new Date(Date.now() + 7 * DAY).toISOString() },
        });
        expect(res.data.customerTierOverride.userErrors).toEqual([]);
      }
    }
    const lost = await expectMail(on, 'tier_lost', 'tiers/changed', ['eve'], ['fin']);
    expect(lost.eve!.subject).toBe('Your Silver membership at Tiers <&> has ended');
    expect(lost.eve!.text).toContain('You are no longer a Silver member. You hold no tier at the moment.');
    await expectNone(off, ['tier_reached', 'tier_lost']);
  });

  it('referral rewards: the referrer\'s and the referee\'s', async () => {
    const { on, off } = await shopPair('Referrals', ['referral_reward']);
    const register = async (shop: Shop, referrer: string, referee: string) => {
      const code = (await (await fetch(`${t.url}/rest-api/v1/referral?customerIdentifier=${referrer}`, { headers: { authorization: `Bearer ${shop.apiKey}` } })).json()).data.referralCode;
      const res = await t.graphql(shop.apiKey, 'mutation($input: ReferralRegisterInput!) { referralRegister(input: $input) { userErrors { code field message } } }', {
        input: { referralCode: code, customer: { shopifyCustomerId: referee, email: `${referee}@example.com` } },
      });
      expect(res.data.referralRegister.userErrors).toEqual([]);
    };
    for (const shop of [on, off]) {
      const res = await t.graphql(shop.apiKey, 'mutation { shopReferralSettingsUpdate(input: { referrerPoints: 50, refereePoints: 20 }) { userErrors { code } } }');
      expect(res.data.shopReferralSettingsUpdate.userErrors).toEqual([]);
      for (const id of ['gil', 'ida']) await t.customer(shop.shopId, id);
    }
    await unsubscribe(on.shopId, 'ida');
    for (const shop of [on, off]) {
      await register(shop, 'gil', 'hal');
      await register(shop, 'ida', 'jo');
      await remember(shop, 'gil', 'hal', 'ida', 'jo');
    }
    const mails = await expectMail(on, 'referral_reward', 'points/added', ['gil', 'hal', 'jo'], ['ida']);
    expect(mails.gil!.subject).toBe('You earned 50 points at Referrals with a referral');
    expect(mails.gil!.text).toContain('You earned 50 points for referring a friend.');
    expect(mails.gil!.text).toContain('Your balance is now 50 points.');
    expect(mails.hal!.subject).toBe('You earned 20 points at Referrals with a referral');
    expect(mails.hal!.text).toContain('You earned 20 points for joining with a friend\'s referral code.');
    expect(mails.hal!.html).toContain('for joining with a friend&#39;s referral code.');
    expect(mails.jo!.text).toContain('You earned 20 points for joining with a friend\'s referral code.');
    await expectNone(off, ['referral_reward']);
  });

  it('the birthday rule\'s credit: its own e-mail, left out of the day\'s points (or in them where birthdays are off)', async () => {
    const zone = 'Asia/Tokyo';
    const { on, off } = await shopPair('Birthdays', ['birthday'], { timezone: zone });
    const day = shopPeriods(new Date(Date.now() + DAY), zone).day;
    for (const shop of [on, off]) {
      for (const id of ['kai', 'lea']) {
        const res = await t.graphql(shop.apiKey, 'mutation($input: CustomerInput!) { customerUpsert(input: $input) { created } }', {
          input: { shopifyCustomerId: id, email: `${id}@example.com`, birthday: `1990${day.slice(4)}` },
        });
        expect(res.data.customerUpsert.created).toBe(true);
      }
      await remember(shop, 'kai', 'lea');
      const rule = await t.graphql(shop.apiKey, 'mutation { earningRuleCreate(input: { type: birthday, name: "Happy birthday", earnPoint: 30 }) { userErrors { message } } }');
      expect(rule.data.earningRuleCreate.userErrors).toEqual([]);
    }
    await unsubscribe(on.shopId, 'lea');

    clock.moveTo(new Date(startOfShopDay(day, zone).getTime() + HOUR));
    await t.app.scheduler.runDue();
    await t.app.scheduler.runDue();
    const mails = await expectMail(on, 'birthday', 'points/earned', ['kai'], ['lea']);
    expect(mails.kai!.subject).toBe('Happy birthday from Birthdays: 30 points');
    expect(mails.kai!.text).toContain('Happy birthday! We gave you 30 points to celebrate.');
    expect(mails.kai!.text).toContain('Your balance is now 30 points.');
    // Told once: not again in the day's points.
    expect((await messagesOf(t, on.shopId)).filter((r) => r.kind === 'points_earned')).toEqual([]);

    await expectNone(off, ['birthday']);
    const summed = (await messagesOf(t, off.shopId)).filter((r) => r.kind === 'points_earned');
    expect(summed.map((r) => [r.customer_id, (r.data as { points: number }).points])).toEqual(
      expect.arrayContaining([[idsByShopifyId.get(`${off.shopId} kai`), 30], [idsByShopifyId.get(`${off.shopId} lea`), 30]]),
    );
    expect(summed).toHaveLength(2);
  });
});
