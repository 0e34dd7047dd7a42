/**
 * kill -9 of one of two instances with a backlog of e-mails (issue 36): nothing queued is lost.
 *
 * Two server processes share a PostgreSQL schema and send one shop's reward e-mails through a real
 * SMTP server that takes 150 ms to answer each message, so the victim always has sends under way
 * when it is SIGKILLed. The survivor takes the victim's claimed e-mails when their leases end
 * (MAIL_TIMEOUT_MS=1000 makes a lease 11 s). Every redemption acknowledged gets its e-mail; the
 * only e-mails that may arrive twice are those whose answer the victim never read (at most its
 * sends in flight: 8 per shop), and every row ends `sent`. PostgreSQL only: PGlite is one process.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { changePoints } from '../../src/domain/ledger/points.js';
import { createPointsRedemption } from '../../src/domain/rewards/index.js';
import { SETTINGS } from '../mail-helpers.js';
import { onPostgres } from '../helpers.js';
import { startSmtp, type TestSmtp } from '../smtp-server.js';
import { checkLedger, killAllServers, pool, scaled, sharedDatabase, startServerProcess, waitUntil } from './processes.js';

const REDIS_URL = process.env.TEST_REDIS_URL;
const MAILS = scaled(240, 2_000);
/** Sends in flight per shop on one instance (the mail worker's default). */
const PER_SHOP = 8;

describe.runIf(onPostgres)('SIGKILL of one of two instances with a mail backlog', () => {
  let db: Awaited<ReturnType<typeof sharedDatabase>>;
  let smtp: TestSmtp;
  let env: Record<string, string>;

  beforeAll(async () => {
    db = await sharedDatabase(MAILS, 'Mail reliability shop');
    for (const id of db.ids) await changePoints(db.db, db.shopId, 'set', { customerIdentifier: id, amount: 1_000 });
    smtp = await startSmtp();
    smtp.answerDelayMs = 150;
    env = {
      DATABASE_URL: db.url,
      ...(REDIS_URL ? { REDIS_URL, REDIS_KEY_PREFIX: `test:${randomBytes(6).toString('hex')}:` } : {}),
      MAIL_TIMEOUT_MS: '1000',
      PUBLIC_URL: 'https://loyalty.example',
      RATE_LIMIT_PER_MINUTE: '1000000',
      DATABASE_POOL_SIZE: '10',
    };
  });
  afterAll(async () => {
    await killAllServers();
    await smtp?.close();
    await db?.close();
  });

  it('sends every queued e-mail after the kill; only the victim\'s unanswered sends go twice', async () => {
    const victim = await startServerProcess(env);
    const survivor = await startServerProcess(env);
    const post = (base: string, path: string, body: unknown) =>
      fetch(`${base}${path}`, { method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${db.apiKey}` }, body: JSON.stringify(body) });

    const settings = await (await post(victim.url, '/graphql', {
      query: SETTINGS,
      variables: { input: { enabled: true, smtpHost: '127.0.0.1', smtpPort: smtp.port, smtpSecurity: 'none', fromName: 'Rewards', fromAddress: 'rewards@shop.example' } },
    })).json();
    expect(settings.data.shopMailSettingsUpdate.userErrors).toEqual([]);
    const { pointsRedemption } = await createPointsRedemption(db.db, db.shopId, {
      name: '$5 off', type: 'amount', discountPrefix: 'FIVE-', rewardValue: 100, discountValue: 5, expireDateType: 'days', expireDays: 30,
    });

    // The backlog: a redemption per customer, through both instances; each queues one reward e-mail.
    const codes = await pool(db.ids, 16, async (id, i) => {
      const res = await post(i % 2 ? survivor.url : victim.url, '/rest-api/v1/pointsRedemptions', { customerIdentifier: id, pointsAmount: 100, rewardId: pointsRedemption._id });
      expect(res.status).toBe(200);
      return (await res.json()).discountCode as string;
    });

    // Mid-backlog: kill -9 while sends are under way.
    await waitUntil(() => smtp.received.length >= MAILS / 4, 60_000, 'a quarter of the e-mails');
    expect(smtp.received.length).toBeLessThan(MAILS);
    await victim.stop('SIGKILL');

    await waitUntil(async () => {
      const { count } = await db.db.selectFrom('mail_messages').select((eb) => eb.fn.countAll<string>().as('count'))
        .where('shop_id', '=', db.shopId).where('status', '<>', 'sent').executeTakeFirstOrThrow();
      return Number(count) === 0;
    }, 90_000, 'every e-mail sent');

    const rows = await db.db.selectFrom('mail_messages').select(['status', 'attempts']).where('shop_id', '=', db.shopId).execute();
    expect(rows).toHaveLength(MAILS);
    const received = new Map<string, number>();
    for (const mail of smtp.received) {
      const code = codes.find((c) => mail.subject?.endsWith(c));
      expect(code, `an e-mail no redemption asked for: ${mail.subject}`).toBeDefined();
      received.set(code!, (received.get(code!) ?? 0) + 1);
    }
    // Nothing lost: every acknowledged redemption's e-mail arrived.
    for (const code of codes) expect(received.get(code) ?? 0, code).toBeGreaterThanOrEqual(1);
    // Twice only for sends the victim had under way: the server took them, the victim never read its answer.
    const twice = [...received.values()].filter((n) => n > 1);
    expect(twice.every((n) => n === 2)).toBe(true);
    expect(twice.length).toBeLessThanOrEqual(PER_SHOP);
    // The survivor did take over: the victim's claimed e-mails were claimed again when their leases ended.
    expect(rows.filter((r) => r.attempts > 1).length).toBeGreaterThan(0);
    // The server saw the victim's connections reset, and nothing else go wrong.
    expect(smtp.connectionErrors.map((e) => (e as NodeJS.ErrnoException).code).filter((c) => c !== 'ECONNRESET')).toEqual([]);
    expect(survivor.output()).not.toMatch(/"level":(50|60)/);
    expect((await checkLedger(db.db, db.shopId)).problems).toEqual([]);
  }, 180_000);
});
