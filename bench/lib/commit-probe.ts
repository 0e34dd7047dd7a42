import { setTimeout as sleep } from 'node:timers/promises';
import { connect } from './postgres.js';

/** One probe commit: when it started (epoch ms) and how long it took. */
export type ProbeCommit = { at: number; ms: number };

/**
 * A bare one-row commit on the database every `everyMs`, on a connection of its own, timed: each
 * waits for a WAL flush, as every write of the service does. When a slow request of the service
 * coincides with a slow probe commit, the database's flush stalled (on this machine, the host's
 * disk: an 8 KB write + fdatasync alone stalls 90-150 ms about once a minute), not the service.
 * Its load is one small insert per `everyMs`.
 */
export async function startCommitProbe(url: string, everyMs = 20): Promise<{ stop(): Promise<ProbeCommit[]> }> {
  const client = await connect(url);
  await client.query('create table if not exists bench_commit_probe (at timestamptz not null)');
  const commits: ProbeCommit[] = [];
  let running = true;
  const loop = (async () => {
    while (running) {
      const at = Date.now();
      const started = performance.now();
      await client.query('insert into bench_commit_probe values (now())');
      commits.push({ at, ms: performance.now() - started });
      await sleep(everyMs);
    }
  })();
  return {
    async stop() {
      running = false;
      await loop;
      await client.query('drop table bench_commit_probe');
      await client.end();
      return commits;
    },
  };
}

/** The slowest probe commit that overlapped [fromMs, toMs] (epoch ms), if any was over `boundMs`. */
export function stalledCommit(commits: readonly ProbeCommit[], fromMs: number, toMs: number, boundMs: number): ProbeCommit | undefined {
  let worst: ProbeCommit | undefined;
  for (const c of commits) {
    if (c.ms > boundMs && c.at <= toMs && c.at + c.ms >= fromMs && (!worst || c.ms > worst.ms)) worst = c;
  }
  return worst;
}
