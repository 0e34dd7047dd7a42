// E-mails to customers (issue 36): 10,000 e-mails queued at once for shop A are sent by the mail
// worker (`npm run worker`) to a local SMTP server (smtp-server, each message parsed back), at a
// rate compared with the target of 200 a second; meanwhile shop H's SMTP server takes connections
// and never answers, and shop B has an e-mail queued every 100 ms, each timed from its queueing to
// its arrival at the server. Then checks: each of A's e-mails arrived exactly once, all recorded
// as sent, none of B's late.
import { setTimeout as sleep } from 'node:timers/promises';
import { openDatabase } from '../../src/db/database.js';
import { upsertCustomer } from '../../src/domain/program/sign-up.js';
import { createShop } from '../../src/domain/shops/shops.js';
import { startHungSmtp, startSmtp } from '../../test/smtp-server.js';
import { percentile } from '../lib/load.js';
import { connect, createIsolatedSchema } from '../lib/postgres.js';
import type { BenchOptions, Scenario } from '../lib/scenario.js';
import { startWorkerProcess } from '../lib/server.js';
import { fmt, formatChecks, formatTable } from '../lib/table.js';

const TARGETS = { rate: 200, p99Ms: 2_000 };
const MAILS = 10_000;
const CUSTOMERS = 200;
const B_EVERY_MS = 100;

type Check = { name: string; ok: boolean; detail: string };

async function seed(url: string, smtpPort: number, hungPort: number) {
  const { db, close } = await openDatabase({ url, poolSize: 8 });
  try {
    const shops: Record<'a' | 'b' | 'h', string> = { a: '', b: '', h: '' };
    for (const [key, port] of [['a', smtpPort], ['b', smtpPort], ['h', hungPort]] as const) {
      const { shop } = await createShop(db, `Shop ${key.toUpperCase()}`);
      shops[key] = shop.id;
      await db
        .insertInto('shop_mail_settings')
        .values({ shop_id: shop.id, enabled: true, smtp_host: '127.0.0.1', smtp_port: port, smtp_security: 'none', from_name: `Shop ${key}`, from_address: `${key}@bench.example` })
        .execute();
      const customers = key === 'a' ? CUSTOMERS : 5;
      for (let i = 0; i < customers; i += 8) {
        await Promise.all(
          Array.from({ length: Math.min(8, customers - i) }, (_, j) => upsertCustomer(db, shop.id, { shopifyCustomerId: `${key}${i + j}`, email: `${key}${i + j}@bench.example` })),
        );
      }
    }
    return shops;
  } finally {
    await close();
  }
}

/** Queues `count` reward e-mails for the shop's customers in one statement; their codes are `<prefix><n>`. */
const QUEUE = `
  insert into mail_messages (id, shop_id, customer_id, kind, source, data, due_at)
  select $2 || g, $1, c.id, 'reward_issued', 'bench-' || $2 || g,
    jsonb_build_object('code', $2 || g, 'value', 5, 'type', 'amount', 'pointsAmount', 100), now()
  from generate_series($3::int, $4::int) g
  join lateral (select id from customers where shop_id = $1 order by id offset (g % (select count(*) from customers where shop_id = $1)) limit 1) c on true`;

export const mail: Scenario = {
  name: 'mail',
  summary: '10,000 queued e-mails sent to a local SMTP server (target 200/s), each once; another shop\'s mail p99 while one shop\'s server hangs',
  async run(options: BenchOptions) {
    const schema = await createIsolatedSchema(options.databaseUrl);
    const smtp = await startSmtp();
    const hung = await startHungSmtp();
    let worker: Awaited<ReturnType<typeof startWorkerProcess>> | undefined;
    const client = await connect(schema.url);
    try {
      // The worker migrates the schema; it finds nothing to send until the seed's rows are queued.
      worker = await startWorkerProcess(schema.url, { PUBLIC_URL: 'https://loyalty.bench.example', LOG_LEVEL: 'warn' });
      const shops = await seed(schema.url, smtp.port, hung.port);
      await client.query(QUEUE, [shops.h, 'H-', 1, 50]);

      // B's e-mails, one every 100 ms while A's burst is sent.
      const queuedB = new Map<string, number>();
      let sendingB = true;
      const trickle = (async () => {
        for (let n = 1; sendingB; n++) {
          await client.query(QUEUE, [shops.b, `B${n}-`, 1, 1]);
          queuedB.set(`B${n}-1`, Date.now());
          await sleep(B_EVERY_MS);
        }
      })();
      const started = Date.now();
      await client.query(QUEUE, [shops.a, 'A-', 1, MAILS]);
      const arrivedA = () => smtp.received.filter((m) => m.subject?.includes(': A-')).length;
      const deadline = started + 300_000;
      while (arrivedA() < MAILS && Date.now() < deadline) await sleep(50);
      const lastA = Math.max(...smtp.received.map((m, i) => (m.subject?.includes(': A-') ? smtp.receivedAt[i]! : 0)));
      sendingB = false;
      await trickle;
      await sleep(2_000);
      const seconds = (lastA - started) / 1000;
      const rate = arrivedA() / seconds;

      const latencies: number[] = [];
      smtp.received.forEach((m, i) => {
        const code = m.subject?.split(': ')[1];
        const queued = code ? queuedB.get(code) : undefined;
        if (queued !== undefined) latencies.push(smtp.receivedAt[i]! - queued);
      });
      latencies.sort((x, y) => x - y);
      const p99 = latencies.length ? percentile(latencies, 99) : Number.NaN;

      const codesA = smtp.received.map((m) => m.subject?.split(': ')[1]).filter((c) => c?.startsWith('A-'));
      const { rows } = await client.query<{ status: string; count: string }>('select status, count(*) from mail_messages where shop_id = $1 group by status', [shops.a]);
      const sent = Number(rows.find((r) => r.status === 'sent')?.count ?? 0);
      const checks: Check[] = [
        { name: `each of A's ${MAILS} e-mails arrived once`, ok: codesA.length === MAILS && new Set(codesA).size === MAILS, detail: `${codesA.length} arrived, ${new Set(codesA).size} distinct` },
        { name: "A's e-mails recorded as sent", ok: sent === MAILS, detail: rows.map((r) => `${r.status} ${r.count}`).join(', ') },
        { name: "B's e-mails all arrived", ok: latencies.length === queuedB.size, detail: `${latencies.length} of ${queuedB.size}` },
        { name: "H's hung server was dialled", ok: hung.connections() > 0, detail: `${hung.connections()} connections` },
      ];
      console.log(
        formatTable(
          ['what', 'figure', 'target'],
          [
            [`A: ${MAILS} e-mails, rate (/s)`, fmt.rate(rate), `>= ${TARGETS.rate}`],
            ['A: seconds from queueing to the last arrival', seconds.toFixed(1), '-'],
            [`B: e-mails (one per ${B_EVERY_MS} ms), p50`, fmt.ms(latencies.length ? percentile(latencies, 50) : Number.NaN), '-'],
            ['B: p99 from queueing to arrival, H hung', fmt.ms(p99), `< ${TARGETS.p99Ms} ms`],
          ],
        ),
      );
      console.log(`targets: rate ${rate >= TARGETS.rate ? 'met' : 'MISSED'}, B p99 ${p99 < TARGETS.p99Ms ? 'met' : 'MISSED'}`);
      console.log(formatChecks(checks).join('\n'));
      return checks.every((c) => c.ok);
    } finally {
      await client.end();
      await worker?.stop();
      await hung.close();
      await smtp.close();
      await schema.drop();
    }
  },
};
