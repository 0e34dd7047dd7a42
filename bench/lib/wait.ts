import { setTimeout as sleep } from 'node:timers/promises';

/** Polls `check` every 5 ms until it holds (true) or `timeoutMs` has passed (false). */
export async function waitFor(check: () => boolean, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) return false;
    await sleep(5);
  }
  return true;
}
