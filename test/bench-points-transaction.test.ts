// `npm run bench` compares the points API with pgbench running "the same transaction"; this keeps
// that true: the statements changePoints sends and those of the pgbench script must match in
// kind, table, columns, row lock and RETURNING.
import { PGlite } from '@electric-sql/pglite';
import { Kysely } from 'kysely';
import { PGliteDialect } from 'kysely-pglite-dialect';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { PGBENCH_TRANSACTION } from '../bench/scenarios/points.js';
import { migrateToLatest } from '../src/db/migrate.js';
import type { Database } from '../src/db/schema.js';
import { upsertCustomer } from '../src/domain/customers.js';
import { changePoints } from '../src/domain/points.js';
import { createShop } from '../src/domain/shops.js';

/** `update customers set points, updated_at returning`, say: what a statement does, not its values. */
function shape(statement: string): string {
  const sql = statement.replace(/"/g, '').replace(/\s+/g, ' ').replace(/;$/, '').trim().toLowerCase();
  const columns = (list: string) => list.split(',').map((c) => c.trim().split(/\s|=/)[0]).join(', ');
  const lock = /for (no key update|update|share|key share)/.exec(sql)?.[0] ?? '';
  const returning = /returning \*/.test(sql) ? 'returning *' : '';
  let head: string;
  if (sql.startsWith('select')) head = `select from ${/from (\w+)/.exec(sql)![1]}`;
  else if (sql.startsWith('update')) head = `update ${/^update (\w+)/.exec(sql)![1]} set ${columns(/ set (.*?) where /.exec(sql)![1]!)}`;
  else if (sql.startsWith('insert')) {
    const [, table, list] = /^insert into (\w+) \(([^)]*)\)/.exec(sql)!;
    head = `insert into ${table} (${columns(list!)})`;
  } else head = sql;
  return [head, lock, returning].filter(Boolean).join(' ');
}

let db: Kysely<Database>;
const sent: string[] = [];

beforeAll(async () => {
  db = new Kysely<Database>({
    dialect: new PGliteDialect(await PGlite.create()),
    log: (event) => {
      if (event.level === 'query') sent.push(event.query.sql);
    },
  });
  await migrateToLatest(db);
});
afterAll(() => db?.destroy());

it('pgbench runs the statements changePoints sends for an add', async () => {
  const { shop } = await createShop(db, 'Bench');
  await upsertCustomer(db, shop.id, { shopifyCustomerId: '100001', email: 'c100001@bench.example' });
  sent.length = 0;
  await changePoints(db, shop.id, 'add', { customerIdentifier: '100001', amount: 1, description: 'bench rest' });

  const script = PGBENCH_TRANSACTION.split('\n')
    .map((line) => line.replace(/\\gset \w+$/, '').trim())
    .filter((line) => line && !line.startsWith('\\'));
  expect(sent.map(shape)).toEqual(script.map(shape));
  expect(sent.map(shape)).toEqual([
    'begin',
    'select from customers for no key update',
    'update customers set points, updated_at returning *',
    expect.stringMatching(/^insert into activities \(id, shop_id, customer_id, .*\) returning \*$/),
    'insert into outbox_events (id, shop_id, type, data)',
    'commit',
  ]);
});
