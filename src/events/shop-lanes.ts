import type { Logger } from '../logger.js';
import { wakeableSleep } from './wakeable-sleep.js';

/**
 * A worker's lanes, one per shop with work due (the Shopify sync's, the mail's): a lane serves its
 * shop until nothing of it is due, at most `maxLanes` run at once, and a free lane goes to a shop
 * `dueShops` names (the longest waiting first). So one shop whose store or server hangs holds its
 * own lane only. A lane that fails is logged and ends; its claimed work waits for its lease.
 * Lanes check `running` to stop.
 */
export function shopLanes(options: {
  /** Names the worker in its logs. */
  name: string;
  logger: Logger;
  maxLanes: number;
  pollMs: number;
  /** Up to `free` shops with work due, none of `busy` (shops that have a lane, or cannot be served now). */
  dueShops(busy: string[], free: number): Promise<string[]>;
  lane(shopId: string): Promise<void>;
}) {
  const lanes = new Map<string, Promise<void>>();
  const idle = wakeableSleep();
  let running = false;
  let loop: Promise<void> | undefined;

  async function run(): Promise<void> {
    while (running) {
      try {
        const free = options.maxLanes - lanes.size;
        if (free > 0) {
          for (const shopId of await options.dueShops([...lanes.keys()], free)) {
            lanes.set(
              shopId,
              options
                .lane(shopId)
                .catch((err) => options.logger.error({ err, shopId }, `${options.name} lane failed; its work waits for its lease`))
                .finally(() => {
                  lanes.delete(shopId);
                  idle.wake();
                }),
            );
          }
        }
      } catch (err) {
        options.logger.error({ err }, `${options.name} could not read its queue; retrying`);
      }
      await idle.sleep(options.pollMs);
    }
  }

  return {
    get running() {
      return running;
    },
    start() {
      if (running) return;
      running = true;
      loop = run();
    },
    /** Ends the loop and waits for every lane to finish. */
    async stop() {
      running = false;
      idle.wake();
      await loop;
      await Promise.all(lanes.values());
    },
    wake: () => idle.wake(),
  };
}
