import { readdirSync, readFileSync } from 'node:fs';

// Linux only: where /proc is missing every figure here is null and the report shows "-".
const TICKS_PER_SECOND = 100; // USER_HZ

/** Fields of /proc/PID/stat after the command name: index 11 is utime, 12 stime, 13 cutime, 14 cstime. */
function statFields(pid: number | 'self'): number[] | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ').map(Number);
  } catch {
    return null;
  }
}

/** CPU seconds a process has used itself (user + system). */
export function processCpuSeconds(pid: number | 'self'): number | null {
  const f = statFields(pid);
  return f ? (f[11]! + f[12]!) / TICKS_PER_SECOND : null;
}

/** CPU seconds of a process and of its children that have exited (pgbench, once it is done). */
function processTreeCpuSeconds(pid: number | 'self'): number | null {
  const f = statFields(pid);
  return f ? (f[11]! + f[12]! + f[13]! + f[14]!) / TICKS_PER_SECOND : null;
}

/**
 * CPU seconds of every PostgreSQL process on this machine: the live ones, plus those that have
 * exited, which the kernel adds to their parent's (the postmaster's) children time. Includes
 * whatever else uses the server, so it is an upper bound for one run.
 */
function postgresCpuSeconds(): number | null {
  let total = 0;
  let found = false;
  let entries: string[];
  try {
    entries = readdirSync('/proc');
  } catch {
    return null;
  }
  for (const entry of entries) {
    if (!/^\d+$/.test(entry)) continue;
    let comm: string;
    try {
      comm = readFileSync(`/proc/${entry}/comm`, 'utf8').trim();
    } catch {
      continue;
    }
    if (comm !== 'postgres') continue;
    const f = statFields(Number(entry));
    if (!f) continue;
    found = true;
    total += f[11]! + f[12]!;
    // The postmaster is the postgres process whose parent is not postgres.
    let parentComm = '';
    try {
      parentComm = readFileSync(`/proc/${f[1]}/comm`, 'utf8').trim();
    } catch {}
    if (parentComm !== 'postgres') total += f[13]! + f[14]!;
  }
  return found ? total / TICKS_PER_SECOND : null;
}

/** Busy CPU seconds of the whole machine (all cores), from /proc/stat. */
function machineBusySeconds(): number | null {
  try {
    const cpu = readFileSync('/proc/stat', 'utf8').split('\n')[0]!.trim().split(/\s+/).slice(1).map(Number);
    const idle = cpu[3]! + cpu[4]!; // idle + iowait
    return (cpu.reduce((a, b) => a + b, 0) - idle) / TICKS_PER_SECOND;
  } catch {
    return null;
  }
}

export type CpuSample = {
  at: number;
  server: number | null;
  postgres: number | null;
  loadGenerator: number | null;
  machine: number | null;
};

/** Where the CPU went during a run, per successful request, in milliseconds. */
export type CpuBreakdown = {
  server: number | null;
  postgres: number | null;
  loadGenerator: number | null;
  /** Everything else on the machine (other users), as a share of all cores during the run. */
  othersShare: number | null;
};

/** `serverPid` may be absent (pgbench phases); the load generator is this process and its exited children. */
export function sampleCpu(serverPid: number | undefined): CpuSample {
  return {
    at: performance.now(),
    server: serverPid ? processCpuSeconds(serverPid) : 0,
    postgres: postgresCpuSeconds(),
    loadGenerator: processTreeCpuSeconds('self'),
    machine: machineBusySeconds(),
  };
}

/** A stretch of time a face ran in: samples taken at its start and at its end. */
export type CpuSpan = { before: CpuSample; after: CpuSample };

/** Over one or more spans (a face measured in several rounds), per successful request. */
export function cpuBreakdown(spans: CpuSpan[], requests: number, cores: number): CpuBreakdown {
  const delta = (k: 'server' | 'postgres' | 'loadGenerator' | 'machine') =>
    spans.some(({ before, after }) => before[k] === null || after[k] === null)
      ? null
      : spans.reduce((sum, { before, after }) => sum + after[k]! - before[k]!, 0);
  const perRequest = (seconds: number | null) => (seconds === null || requests === 0 ? null : (seconds * 1000) / requests);
  const [server, postgres, loadGenerator, machine] = [delta('server'), delta('postgres'), delta('loadGenerator'), delta('machine')];
  const wall = spans.reduce((sum, { before, after }) => sum + (after.at - before.at) / 1000, 0);
  const ours = (server ?? 0) + (postgres ?? 0) + (loadGenerator ?? 0);
  return {
    server: perRequest(server),
    postgres: perRequest(postgres),
    loadGenerator: perRequest(loadGenerator),
    othersShare: machine === null || wall <= 0 ? null : Math.max(0, machine - ours) / (wall * cores),
  };
}
