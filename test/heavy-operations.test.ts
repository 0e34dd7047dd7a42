import { setTimeout as sleep } from 'node:timers/promises';
import { type ExecutionArgs, type ExecutionResult, parse } from 'graphql';
import { describe, expect, it } from 'vitest';
import { useHeavyOperationQueue } from '../src/graphql/heavy-operations.js';
import { graphqlRateUnits } from '../src/graphql/limits.js';
import { schema } from '../src/graphql/schema.js';

const HEAVY = parse('{ customers(first: 250) { edges { node { _id email activities(first: 1) { edges { node { _id } } } } } } }');
const LIGHT = parse('{ webhookTopics { topic } }');

/**
 * Runs one operation through the plugin's onExecute as envelop does, with an executor that takes
 * 30 ms and records when it ran.
 */
function runner() {
  const plugin = useHeavyOperationQueue(schema);
  const spans: Array<{ name: string; start: number; end: number }> = [];
  const run = async (name: string, shopId: string, document: typeof HEAVY) => {
    let executeFn = async (_args: ExecutionArgs): Promise<ExecutionResult> => {
      const start = performance.now();
      await sleep(30);
      spans.push({ name, start, end: performance.now() });
      return { data: {} };
    };
    const args = { schema, document, contextValue: { shop: { id: shopId } } } as unknown as ExecutionArgs;
    (plugin.onExecute as Function)({ args, executeFn, setExecuteFn: (fn: typeof executeFn) => (executeFn = fn) });
    return executeFn(args);
  };
  const overlap = (a: string, b: string) => {
    const x = spans.find((s) => s.name === a)!;
    const y = spans.find((s) => s.name === b)!;
    return x.start < y.end && y.start < x.end;
  };
  return { run, overlap, spans };
}

describe('heavy operations queue per shop', () => {
  it('counts the documents as heavy and light as the rate limiter does', () => {
    expect(graphqlRateUnits(schema, HEAVY, undefined)).toBeGreaterThan(1);
    expect(graphqlRateUnits(schema, LIGHT, undefined)).toBe(1);
  });

  it('runs one shop\'s heavy operations one at a time, in arrival order; other shops and light operations do not wait', async () => {
    const { run, overlap, spans } = runner();
    await Promise.all([
      run('a1', 'shop-a', HEAVY),
      run('a2', 'shop-a', HEAVY),
      run('a3', 'shop-a', HEAVY),
      run('b1', 'shop-b', HEAVY),
      run('a-light', 'shop-a', LIGHT),
    ]);
    expect(overlap('a1', 'a2')).toBe(false);
    expect(overlap('a2', 'a3')).toBe(false);
    expect(overlap('a1', 'a3')).toBe(false);
    const order = spans.filter((s) => s.name.startsWith('a') && s.name !== 'a-light').sort((x, y) => x.start - y.start).map((s) => s.name);
    expect(order).toEqual(['a1', 'a2', 'a3']);
    expect(overlap('a1', 'b1')).toBe(true);
    expect(overlap('a1', 'a-light')).toBe(true);
  });

  it('lets the next one run when an operation throws', async () => {
    const plugin = useHeavyOperationQueue(schema);
    const args = { schema, document: HEAVY, contextValue: { shop: { id: 's' } } } as unknown as ExecutionArgs;
    const wrap = (fn: () => Promise<ExecutionResult>) => {
      let executeFn = fn as (a: ExecutionArgs) => Promise<ExecutionResult>;
      (plugin.onExecute as Function)({ args, executeFn, setExecuteFn: (f: typeof executeFn) => (executeFn = f) });
      return executeFn(args);
    };
    await expect(wrap(async () => { throw new Error('boom'); })).rejects.toThrow('boom');
    await expect(wrap(async () => ({ data: { ok: true } }))).resolves.toEqual({ data: { ok: true } });
  });
});
