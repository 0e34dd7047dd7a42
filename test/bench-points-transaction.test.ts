// `npm run bench` compares the points API with pgbench running "the same transaction"; this keeps
// that true: the statements changePoints sends and those of the pgbench script must match in
// kind, table, columns, row lock and RETURNING.
import type { Kysely } from 'kysely';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { PGBENCH_TRANSACTION } from '../bench/scenarios/points.js';
import type { Database } from '../src/db/schema.js';
import { apiKeyActor } from '../src/domain/audit/index.js';
import { changePoints } from '../src/domain/ledger/points.js';
import { upsertCustomer } from '../src/domain/program/sign-up.js';
import { createShop } from '../src/domain/shops/shops.js';
import { openLoggedPglite } from './helpers.js';

/**
 * The statement with every value replaced by `?`: the service's bind parameters, and the script's
 * pgbench variables, literals and the SQL that makes ids and timestamps.
 */
function withoutValues(statement: string): string {
  return statement
    .replace(/'evt_' \|\| /g, '')
    .replace(/substr\(md5\(random\(\)::text\), 1, 24\)|now\(\)|\$\d+|(?<!:):\w+|'[^']*'|\bnull\b|\b\d+\b/g, '?')
    // The service binds each column as one array; the script builds a one-element array in SQL.
    .replace(/array\[\?\]/g, '?')
    .replace(/\s+/g, ' ')
    .trim()
    .replace(/;$/, '');
}

let db: Kysely<Database>;
const sent: string[] = [];

beforeAll(async () => {
  db = await openLoggedPglite((sql) => sent.push(sql));
});
afterAll(() => db?.destroy());

it('pgbench runs the statement changePoints sends for an add', async () => {
  const { shop } = await createShop(db, 'Bench');
  await upsertCustomer(db, shop.id, { shopifyCustomerId: '100001', email: 'c100001@bench.example' });
  // As REST calls it: by an API key, whose change the statement also audits.
  const key = await db.selectFrom('api_keys').select(['id', 'prefix']).where('shop_id', '=', shop.id).executeTakeFirstOrThrow();
  sent.length = 0;
  await changePoints(db, shop.id, 'add', { customerIdentifier: '100001', amount: 1, description: 'bench rest' }, apiKeyActor(key));

  const script = PGBENCH_TRANSACTION.split('\n')
    .filter((line) => !line.startsWith('\\'))
    .join('\n');
  expect(sent).toHaveLength(1);
  expect(withoutValues(sent[0]!)).toEqual(withoutValues(script));
  expect(withoutValues(sent[0]!)).toMatch(/ target as \( select c.id, c.points, i.ord from input i join customers c .* order by c.id for no key update of c \)/);
});
