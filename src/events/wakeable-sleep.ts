/**
 * The idle wait of a polling loop (outbox relay, delivery worker, shop lanes): `sleep(ms)` ends after `ms`, or
 * at once when `wake()` is called (new work announced, or the loop stopping). A wake while nobody
 * sleeps is a no-op: loops keep their own "something happened meanwhile" flag.
 */
export function wakeableSleep(): { sleep(ms: number): Promise<void>; wake(): void } {
  let wakeUp: (() => void) | undefined;
  return {
    sleep(ms) {
      return new Promise<void>((resolve) => {
        const done = () => {
          clearTimeout(timer);
          wakeUp = undefined;
          resolve();
        };
        const timer = setTimeout(done, ms);
        wakeUp = done;
      });
    },
    wake() {
      wakeUp?.();
    },
  };
}
