import type { GraphQLSchema } from 'graphql';
import type { Plugin } from 'graphql-yoga';
import type { GraphQLContext } from './builder.js';
import { graphqlRateUnits } from './limits.js';
import { perOperation } from './per-operation.js';

/**
 * A shop's heavy queries and mutations (more than one rate unit: wide nested lists) run one at a
 * time on each instance. Building such an answer holds the event loop for tens of milliseconds;
 * a burst of them side by side held every other shop's requests for the sum. One at a time, other
 * shops' requests get their turn between them. Listed last, so it wraps the executor the others
 * chose (compiled or not).
 */
export function useHeavyOperationQueue(schema: GraphQLSchema): Plugin<GraphQLContext> {
  // Worked out once per operation clients send, not on every request (a pointsAdd is on this path).
  const isHeavy = perOperation((document, operationName) => graphqlRateUnits(schema, document, operationName) > 1);
  // Per shop, the end of its last heavy operation queued here.
  const tails = new Map<string, Promise<void>>();
  return {
    onExecute({ args, executeFn, setExecuteFn }) {
      if (!isHeavy(args.document, args.operationName)) return;
      const shopId = args.contextValue.shop.id;
      setExecuteFn(async (execution) => {
        const before = tails.get(shopId) ?? Promise.resolve();
        let done!: () => void;
        const mine = new Promise<void>((resolve) => (done = resolve));
        tails.set(shopId, mine);
        await before;
        try {
          return await executeFn(execution);
        } finally {
          done();
          if (tails.get(shopId) === mine) tails.delete(shopId);
        }
      });
    },
  };
}
