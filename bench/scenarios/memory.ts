// Memory: the embedded server (PGlite in a data folder, as `npm start` runs without DATABASE_URL)
// on a new folder and again on it after a restart: resident memory at idle, after a short burst of
// requests, and at its peak, then what the resident memory is made of.
import { type ChildProcess, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { runHttpLoad } from '../lib/load.js';
import type { Scenario } from '../lib/scenario.js';
import { REPO_ROOT, startServer } from '../lib/server.js';
import { fmt, formatTable } from '../lib/table.js';
import { waitFor } from '../lib/wait.js';

const SETTLE_MS = 5_000;
const BURST = 2_000;
const MiB = 1024 * 1024;
const mib = (bytes: number) => `${Math.round(bytes / MiB)} MiB`;

/** VmRSS or VmHWM of a process, in bytes; null once it has exited. */
function status(pid: number, field: 'VmRSS' | 'VmHWM'): number | null {
  try {
    return Number(new RegExp(`${field}:\\s+(\\d+)`).exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]) * 1024;
  } catch {
    return null;
  }
}

function children(pid: number): number[] {
  try {
    return readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').split(' ').filter(Boolean).map(Number);
  } catch {
    return [];
  }
}

/**
 * The highest VmHWM of the server's own child processes (the one that creates a new data folder's
 * database), sampled until stopped: a child's peak is gone with it. The server is a child of this process.
 */
function watchServerChildren(): () => number {
  let peak = 0;
  const timer = setInterval(() => {
    for (const server of children(process.pid)) for (const child of children(server)) peak = Math.max(peak, status(child, 'VmHWM') ?? 0);
  }, 50);
  return () => {
    clearInterval(timer);
    return peak;
  };
}

type Run = { label: string; readySec: number; idle: number; afterBurst: number; peak: number; childPeak: number; burst: string };

/** One start of the server on `dataDir`; `apiKey` is the demo shop's, printed only by the first start. */
async function runOnce(label: string, dataDir: string, apiKey: { value?: string }): Promise<Run> {
  const started = Date.now();
  const stopWatching = watchServerChildren();
  const server = await startServer({ databaseUrl: '', dataDir });
  const { pid } = server;
  try {
    // The banner comes after the demo shop is made: start-up is over.
    if (!(await waitFor(() => /key create/.test(server.output()), 120_000))) throw new Error(`no banner: ${server.logged().join('\n')}`);
    const readySec = (Date.now() - started) / 1000;
    const childPeak = stopWatching();
    await sleep(SETTLE_MS);
    const idle = status(pid, 'VmRSS')!;
    apiKey.value ??= /^\s+(lk_\S+)$/m.exec(server.output())?.[1];
    const burst = await runHttpLoad({
      url: `${server.url}/rest-api/v1/points/add`,
      connections: 8,
      amount: BURST,
      headers: { authorization: `Bearer ${apiKey.value}`, 'content-type': 'application/json' },
      body: () => JSON.stringify({ customerIdentifier: `demo-100${1 + Math.floor(Math.random() * 3)}`, amount: 1, description: 'bench memory' }),
    });
    await sleep(SETTLE_MS);
    return {
      label,
      readySec,
      idle,
      afterBurst: status(pid, 'VmRSS')!,
      peak: status(pid, 'VmHWM')!,
      childPeak,
      burst: `${burst.ok} ok, ${burst.failed} failed, ${fmt.rate(burst.rate)}/s, p99 ${fmt.ms(burst.p99)}`,
    };
  } finally {
    stopWatching();
    await server.stop();
  }
}

function stages(dataDir: string): Promise<Array<Record<string, number | string>>> {
  const child: ChildProcess = spawn(process.execPath, ['--import', 'tsx', 'bench/lib/memory-stages.ts'], {
    cwd: REPO_ROOT,
    env: { ...process.env, DATABASE_URL: '', DATA_DIR: dataDir, PORT: '0', LOG_LEVEL: 'warn', NODE_ENV: 'production' },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let out = '';
  child.stdout!.on('data', (chunk) => (out += chunk));
  return new Promise((resolve, reject) => {
    child.once('error', reject);
    child.once('exit', (code) => (code === 0 ? resolve(out.trim().split('\n').map((l) => JSON.parse(l))) : reject(new Error(`memory-stages exited with ${code}: ${out}`))));
  });
}

export const memory: Scenario = {
  name: 'memory',
  summary: 'the embedded server (PGlite): resident memory at idle after a first start and a restart, peak, breakdown',
  async run() {
    const dataDir = await mkdtemp(path.join(os.tmpdir(), 'bench-memory-'));
    try {
      const apiKey: { value?: string } = {};
      const runs = [await runOnce('first start (new folder)', dataDir, apiKey), await runOnce('restart (same folder)', dataDir, apiKey)];
      process.stdout.write(
        `${formatTable(
          ['start', 'ready', `RSS idle (${SETTLE_MS / 1000} s)`, `RSS after ${BURST} points/add`, 'peak (VmHWM)', 'initdb child peak', 'burst'],
          runs.map((r) => [r.label, `${r.readySec.toFixed(1)} s`, mib(r.idle), mib(r.afterBurst), mib(r.peak), r.childPeak ? mib(r.childPeak) : '-', r.burst]),
        )}\n`,
      );
      const steps = await stages(dataDir);
      const rows = steps.map((s, i) => [
        String(s.stage),
        mib(Number(s.rss)),
        i === 0 ? '' : `+${mib(Number(s.rss) - Number(steps[i - 1]!.rss))}`,
        `${mib(Number(s.heapUsed))} / ${mib(Number(s.heapTotal))}`,
        mib(Number(s.external) - Number(s.arrayBuffers)),
        s.wasmResident === undefined ? '' : mib(Number(s.wasmResident)),
      ]);
      process.stdout.write(
        `\nWhat it is made of (the steps of npm start, one process, restart case):\n${formatTable(
          ['step', 'RSS', 'added', 'JS heap used / total', 'WASM memory (external)', 'WASM resident'],
          rows,
        )}\n`,
      );
      return runs.every((r) => r.burst.startsWith(`${BURST} ok`));
    } finally {
      await rm(dataDir, { recursive: true, force: true });
    }
  },
};
