/**
 * Joins the lookup already running under `key` in `pending`, or starts one with `start`: callers
 * arriving together with one cache miss (a burst of connections with one API key, say) share a
 * single query instead of queueing one each for the database pool.
 */
export function singleFlight<V>(pending: Map<string, Promise<V>>, key: string, start: () => Promise<V>): Promise<V> {
  let running = pending.get(key);
  if (!running) {
    running = start().finally(() => pending.delete(key));
    pending.set(key, running);
  }
  return running;
}
