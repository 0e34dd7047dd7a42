// Ctrl-C in the middle of a run must not leave a server running or a schema behind.
const cleanups = new Set<() => Promise<void>>();

/** Runs `fn` if the bench is interrupted; the returned function unregisters it. */
export function onInterrupt(fn: () => Promise<void>): () => void {
  cleanups.add(fn);
  return () => cleanups.delete(fn);
}

/** Runs every registered cleanup (newest first), each at most once. */
export async function runCleanups(): Promise<void> {
  const pending = [...cleanups].reverse();
  cleanups.clear();
  for (const fn of pending) await fn().catch(() => {});
}
