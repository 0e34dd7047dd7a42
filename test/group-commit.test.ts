// Group commit (src/db/group-commit.ts): first the mechanism on its own, then balance changes
// through it on a real database, counting the statements that reach it.
import { setTimeout as sleep } from 'node:timers/promises';
import type { Kysely } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DatabaseOverloadedError } from '../src/db/database.js';
import { groupCommit } from '../src/db/group-commit.js';
import type { Database } from '../src/db/schema.js';
import { changePoints } from '../src/domain/ledger/points.js';
import { upsertCustomer } from '../src/domain/program/sign-up.js';
import { createShop } from '../src/domain/shops/shops.js';
import { openLoggedPglite } from './helpers.js';

type Item = { key: string; fail?: boolean };

/** A write that takes `ms`, records each statement's items, and answers each item with its key. */
function recordingWrite(ms: number, error?: (items: Item[]) => Error | undefined) {
  const statements: string[][] = [];
  const write = async (items: Item[]) => {
    statements.push(items.map((i) => i.key));
    await sleep(ms);
    const err = error?.(items);
    if (err) throw err;
    return items.map((i) => `wrote ${i.key}`);
  };
  return { statements, write };
}

/** A free slot takes the first write that gathers (the mechanism's settings that these tests are not about). */
const EVERY_ARRIVAL = { minBatch: 1, maxGatherMs: 1_000 };

const sqlError = (code: string) => Object.assign(new Error(`sqlstate ${code}`), { code });

describe('groupCommit', () => {
  it('runs a lone write at once, and gathers writes that arrive while every slot is busy', async () => {
    const { statements, write } = recordingWrite(20);
    const submit = groupCommit<Item, string>({ write, key: (i) => i.key, maxInFlight: 2, maxBatch: 10, ...EVERY_ARRIVAL });
    expect(await submit({ key: 'a' })).toBe('wrote a');
    expect(statements).toEqual([['a']]);

    statements.length = 0;
    const results = await Promise.all(Array.from({ length: 12 }, (_, n) => submit({ key: `k${n}` })));
    expect(results).toEqual(Array.from({ length: 12 }, (_, n) => `wrote k${n}`));
    // Two run alone, the next ten gather for one statement.
    expect(statements).toEqual([['k0'], ['k1'], ['k2', 'k3', 'k4', 'k5', 'k6', 'k7', 'k8', 'k9', 'k10', 'k11']]);
  });

  it('while a statement runs, starts the next only once minBatch writes have gathered, or when the running ones end', async () => {
    const { statements, write } = recordingWrite(30);
    const submit = groupCommit<Item, string>({ write, key: (i) => i.key, maxInFlight: 2, maxBatch: 10, minBatch: 3, maxGatherMs: 1_000 });
    const first = submit({ key: 'a' });
    // b and c wait with a slot free; d makes three, and they start together while a still runs.
    const next = ['b', 'c', 'd'].map((key) => submit({ key }));
    await sleep(5);
    expect(statements).toEqual([['a'], ['b', 'c', 'd']]);
    // Both slots busy: e and f gather, and start when the running statements end, though only two.
    const last = ['e', 'f'].map((key) => submit({ key }));
    await Promise.all([first, ...next, ...last]);
    expect(statements).toEqual([['a'], ['b', 'c', 'd'], ['e', 'f']]);
  });

  it('a statement stuck on a lock holds up the writes that gather behind it for maxGatherMs at most', async () => {
    const { statements, write } = recordingWrite(0);
    let unblock!: () => void;
    const blocked = new Promise<void>((resolve) => (unblock = resolve));
    const submit = groupCommit<Item, string>({
      write: async (items) => {
        if (items.some((i) => i.key === 'stuck')) await blocked;
        return write(items);
      },
      key: (i) => i.key,
      maxInFlight: 2,
      maxBatch: 10,
      minBatch: 16,
      maxGatherMs: 20,
    });
    const stuck = submit({ key: 'stuck' });
    const started = performance.now();
    expect(await Promise.all([submit({ key: 'x' }), submit({ key: 'y' })])).toEqual(['wrote x', 'wrote y']);
    expect(performance.now() - started).toBeGreaterThanOrEqual(15);
    expect(statements).toEqual([['x', 'y']]);
    unblock();
    expect(await stuck).toBe('wrote stuck');
  });

  it('never puts two writes with one key in a statement, nor more than maxBatch', async () => {
    const { statements, write } = recordingWrite(20);
    const submit = groupCommit<Item, string>({ write, key: (i) => i.key, maxInFlight: 1, maxBatch: 3, ...EVERY_ARRIVAL });
    const keys = ['busy', 'x', 'y', 'x', 'z', 'w'];
    expect(await Promise.all(keys.map((key) => submit({ key })))).toEqual(keys.map((k) => `wrote ${k}`));
    // 'busy' runs; x, y, z gather; the second x and w (over maxBatch) run alone at once.
    expect(statements).toEqual([['busy'], ['x'], ['w'], ['x', 'y', 'z']]);
    for (const statement of statements) expect(new Set(statement).size).toBe(statement.length);
  });

  it('tries each write alone when PostgreSQL refused the shared statement, so only the bad one fails', async () => {
    // A deadlock-like refusal of any statement holding the bad item, as PostgreSQL rolls back a whole statement.
    const { statements, write } = recordingWrite(10, (items) => (items.some((i) => i.fail) ? sqlError('40P01') : undefined));
    const submit = groupCommit<Item, string>({ write, key: (i) => i.key, maxInFlight: 1, maxBatch: 10, ...EVERY_ARRIVAL });
    const results = await Promise.allSettled([submit({ key: 'first' }), submit({ key: 'a' }), submit({ key: 'bad', fail: true }), submit({ key: 'b' })]);
    expect(results.map((r) => (r.status === 'fulfilled' ? r.value : (r.reason as Error).message))).toEqual([
      'wrote first',
      'wrote a',
      'sqlstate 40P01',
      'wrote b',
    ]);
    // Alone, a deadlock's victim is tried again, three times in all, before its error is given.
    expect(statements).toEqual([['first'], ['a', 'bad', 'b'], ['a'], ['bad'], ['b'], ['bad'], ['bad']]);
  });

  it('a write chosen as a deadlock\'s victim alone goes through when tried again', async () => {
    let refusals = 0;
    const { statements, write } = recordingWrite(5, (items) => (items.some((i) => i.fail) && refusals++ < 2 ? sqlError('40P01') : undefined));
    const submit = groupCommit<Item, string>({ write, key: (i) => i.key, maxInFlight: 1, maxBatch: 10, ...EVERY_ARRIVAL });
    expect(await submit({ key: 'victim', fail: true })).toBe('wrote victim');
    expect(statements).toEqual([['victim'], ['victim'], ['victim']]);
  });

  it('fails every write of a statement shed by the pool or cut off (the commit may have happened): none is tried again', async () => {
    for (const err of [new DatabaseOverloadedError(4), sqlError('57P01'), new Error('Connection terminated unexpectedly')]) {
      const { statements, write } = recordingWrite(10, (items) => (items.length > 1 ? err : undefined));
      const submit = groupCommit<Item, string>({ write, key: (i) => i.key, maxInFlight: 1, maxBatch: 10, ...EVERY_ARRIVAL });
      const results = await Promise.allSettled(['first', 'a', 'b'].map((key) => submit({ key })));
      expect(results.map((r) => r.status)).toEqual(['fulfilled', 'rejected', 'rejected']);
      expect(statements).toEqual([['first'], ['a', 'b']]);
    }
  });
});

describe('balance changes share statements under load (PGlite)', () => {
  let db: Kysely<Database>;
  const statements: string[] = [];

  beforeAll(async () => {
    db = await openLoggedPglite((sql) => {
      if (sql.includes('insert into activities')) statements.push(sql);
    });
  });
  afterAll(() => db?.destroy());

  it('60 concurrent changes for 20 customers, by id and by e-mail: fewer statements, every ledger exact', async () => {
    const { shop } = await createShop(db, 'Group commit');
    const ids = Array.from({ length: 20 }, (_, i) => `gc-${i}`);
    for (const id of ids) await upsertCustomer(db, shop.id, { shopifyCustomerId: id, email: `${id}@Example.com` });
    statements.length = 0;

    // Three rounds per customer: +30 by id, +20 by e-mail (another case), then -25 by id.
    const calls = ids.flatMap((id) => [
      changePoints(db, shop.id, 'add', { customerIdentifier: id, amount: 30 }),
      changePoints(db, shop.id, 'add', { customerIdentifier: `${id.toUpperCase()}@EXAMPLE.COM`, amount: 20 }),
      changePoints(db, shop.id, 'subtract', { customerIdentifier: id, amount: 25 }).catch((err: Error) => err),
    ]);
    const results = await Promise.all(calls);

    expect(statements.length).toBeLessThan(calls.length);
    expect(statements.length).toBeGreaterThan(0);
    for (const id of ids) {
      const customer = await db.selectFrom('customers').selectAll().where('shop_id', '=', shop.id).where('shopify_customer_id', '=', id).executeTakeFirstOrThrow();
      const entries = await db.selectFrom('activities').selectAll().where('customer_id', '=', customer.id).orderBy('seq').execute();
      // A subtraction that came before both adds was refused (422); every other change is in the ledger.
      const applied = results.filter((r, i) => ids[Math.floor(i / 3)] === id && !(r instanceof Error)).length;
      expect(entries).toHaveLength(applied);
      expect(entries.every((e, i) => e.old_points === (i === 0 ? 0 : entries[i - 1]!.new_points))).toBe(true);
      expect(customer.points).toBe(entries.at(-1)!.new_points);
      expect([25, 50]).toContain(customer.points);
    }
    // Each result is its own change's activity.
    for (const [i, r] of results.entries()) {
      if (r instanceof Error) expect(r.message).toMatch(/cannot subtract 25/);
      else expect(r.activity.newPoints - r.activity.oldPoints).toBe([30, 20, -25][i % 3]);
    }
    const events = await db.selectFrom('outbox_events').select((eb) => eb.fn.countAll<number>().as('n')).where('shop_id', '=', shop.id).where('type', 'like', 'points/%').executeTakeFirstOrThrow();
    expect(Number(events.n)).toBe(results.filter((r) => !(r instanceof Error)).length);
  });
});
