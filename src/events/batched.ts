/**
 * Group commit: `add` queues an item and resolves once the batch holding it is flushed. A batch is
 * whatever queued while the previous flush ran, so a lone item goes out at once and a busy worker
 * writes many per round trip (the webhook worker's attempts, the mail worker's sent e-mails).
 */
export function batched<T>(flush: (items: T[]) => Promise<void>): (item: T) => Promise<void> {
  let queue: Array<{ item: T; resolve: () => void; reject: (err: unknown) => void }> = [];
  let flushing = false;
  async function drain() {
    flushing = true;
    while (queue.length) {
      const batch = queue;
      queue = [];
      try {
        await flush(batch.map((q) => q.item));
        for (const q of batch) q.resolve();
      } catch (err) {
        for (const q of batch) q.reject(err);
      }
    }
    flushing = false;
  }
  return (item) =>
    new Promise<void>((resolve, reject) => {
      queue.push({ item, resolve, reject });
      if (!flushing) void drain();
    });
}
