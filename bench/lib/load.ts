import { setTimeout as sleep } from 'node:timers/promises';
import autocannon from 'autocannon';
import { Pool } from 'undici';

/** What one measured phase produced, whatever drove it (autocannon or pgbench). */
export type Measurement = {
  /** Successful requests (2xx) or committed transactions per second. */
  rate: number;
  p50: number;
  p99: number;
  /** Successful requests or transactions in the phase. */
  ok: number;
  /** Everything else: non-2xx responses, socket errors, timeouts, failed transactions. */
  failed: number;
  durationSec: number;
  /** What the failures were, e.g. `429 ×32` or `timeout ×2`, and one failing response's status and body. */
  failures?: string;
  /** Every latency measured, in ms, so that several runs can be merged into one (`combine`). */
  latencies: number[];
  /** Open loop only: when the requests slower than the target were sent, grouped (see `slowEpisodes`). */
  slow?: SlowEpisode[];
};

/** Requests over a latency bound whose starts fall close together: one stall, not many slow requests. */
export type SlowEpisode = {
  /** Seconds from the run's start. */
  startSec: number;
  endSec: number;
  /** The same as wall-clock times (epoch ms), to match with what else happened then. */
  fromMs: number;
  toMs: number;
  requests: number;
  maxMs: number;
};

/**
 * Groups the requests slower than `boundMs` into episodes (starts within `gapMs` of the previous
 * slow one), slowest first. Scattered slow requests are queueing; a tight episode of dozens is a
 * stall, and its time can be matched with what the server or the database did then.
 */
export function slowEpisodes(sent: ArrayLike<number>, latencies: ArrayLike<number>, boundMs: number, originMs: number, gapMs = 50): SlowEpisode[] {
  const slow = Array.from({ length: latencies.length }, (_, i) => i)
    .filter((i) => latencies[i]! > boundMs)
    .sort((a, b) => sent[a]! - sent[b]!);
  const episodes: SlowEpisode[] = [];
  let last: SlowEpisode | undefined;
  let lastSent = -Infinity;
  for (const i of slow) {
    const at = sent[i]! / 1000;
    if (!last || sent[i]! - lastSent > gapMs) {
      last = { startSec: at, endSec: at, fromMs: originMs + sent[i]!, toMs: originMs + sent[i]!, requests: 0, maxMs: 0 };
      episodes.push(last);
    }
    last.endSec = (sent[i]! + latencies[i]!) / 1000;
    last.toMs = originMs + sent[i]! + latencies[i]!;
    last.requests++;
    last.maxMs = Math.max(last.maxMs, latencies[i]!);
    lastSent = sent[i]!;
  }
  return episodes.sort((a, b) => b.maxMs - a.maxMs);
}

/** The value at percentile `p` of ascending `sorted` (nearest rank). */
export function percentile(sorted: ArrayLike<number>, p: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
}

/** Latencies (ms, any order) to p50 and p99. */
export function summarize(latencies: number[]): Pick<Measurement, 'p50' | 'p99'> {
  const sorted = Float64Array.from(latencies).sort();
  return { p50: percentile(sorted, 50), p99: percentile(sorted, 99) };
}

/** Several runs of one load as one: their successes over their summed durations, percentiles over all their latencies. */
export function combine(runs: Measurement[]): Measurement {
  const latencies = runs.flatMap((m) => m.latencies);
  const ok = runs.reduce((n, m) => n + m.ok, 0);
  const durationSec = runs.reduce((n, m) => n + m.durationSec, 0);
  const failures = runs.map((m) => m.failures).filter(Boolean);
  return {
    rate: ok / durationSec,
    ...summarize(latencies),
    ok,
    failed: runs.reduce((n, m) => n + m.failed, 0),
    durationSec,
    latencies,
    ...(failures.length ? { failures: failures.join('; ') } : {}),
  };
}

export type HttpLoad = {
  url: string;
  connections: number;
  /**
   * How many requests to send. A count, not a duration: autocannon waits for every response, so
   * each request that reached the server is counted (a timed run abandons those in flight at
   * the end, and the ledger check could not match activities to responses).
   */
  amount: number;
  method?: 'POST' | 'GET' | 'PUT';
  headers?: Record<string, string>;
  /** A fresh body for every request (so load spreads over many customers). */
  body?: () => string;
  /** A fresh path for every request (a new order id each PUT), instead of the url's. */
  path?: () => string;
  /** More headers for each request, made from its body (a signature of it). */
  signed?: (body: string) => Record<string, string>;
};

/** One autocannon run; `rate` counts only 2xx responses, latencies are those of every response. */
export async function runHttpLoad(load: HttpLoad): Promise<Measurement> {
  const { body, path, signed } = load;
  const fresh = (request: autocannon.Request) => {
    const text = body?.();
    return {
      ...request,
      ...(text !== undefined ? { body: text } : {}),
      ...(path ? { path: path() } : {}),
      ...(signed && text !== undefined ? { headers: { ...request.headers, ...signed(text) } } : {}),
    };
  };
  if (load.amount < load.connections) throw new Error(`send at least one request per connection, not ${load.amount}`);
  let started = performance.now();
  let lastResponse = started;
  const latencies: number[] = [];
  const result = await new Promise<autocannon.Result>((resolve, reject) => {
    const instance = autocannon(
      {
        url: load.url,
        connections: load.connections,
        amount: load.amount,
        method: load.method ?? 'POST',
        headers: load.headers,
        ...(body || path ? { requests: [{ setupRequest: fresh }] } : {}),
      },
      (err, res) => (err ? reject(err) : resolve(res)),
    );
    instance.on('start', () => {
      started = performance.now();
    });
    instance.on('response', (_client, _status, _bytes, responseTime) => {
      lastResponse = performance.now();
      latencies.push(responseTime);
    });
  });
  // autocannon notices the last response only at its next one-second tick, and reports whole
  // ticks as its duration; the time from start to the last response is the real one.
  const durationSec = (lastResponse - started) / 1000;
  const ok = result['2xx'];
  const failed = result.non2xx + result.errors + result.timeouts;
  return {
    rate: ok / durationSec,
    ...summarize(latencies),
    ok,
    failed,
    durationSec,
    latencies,
    ...(failed > 0 ? { failures: await describeFailures(load, result) } : {}),
  };
}

/** Status counts from autocannon, plus one fresh request's answer if it fails too (so the cause is on screen). */
async function describeFailures(load: HttpLoad, result: autocannon.Result): Promise<string> {
  const counts = Object.entries(result.statusCodeStats ?? {})
    .filter(([status]) => !status.startsWith('2'))
    .map(([status, { count }]) => `${status} ×${count ?? 0}`);
  if (result.errors) counts.push(`socket error ×${result.errors}`);
  if (result.timeouts) counts.push(`timeout ×${result.timeouts}`);
  let sample = '';
  try {
    const text = load.body?.();
    const res = await fetch(load.url, { method: load.method ?? 'POST', headers: { ...load.headers, ...(text !== undefined ? load.signed?.(text) : {}) }, body: text });
    if (!res.ok) sample = `; e.g. ${res.status} ${(await res.text()).slice(0, 300)}`;
  } catch (err) {
    sample = `; e.g. ${(err as Error).message}`;
  }
  return counts.join(', ') + sample;
}

/**
 * A short probe, then about `warmupSec` of warm-up: the server's code is optimized, its pool
 * filled. Returns the rate last seen (to size later runs: they are counts, see HttpLoad) and the
 * successes (for the ledger check).
 */
export async function warmUp(load: Omit<HttpLoad, 'amount'>, warmupSec: number): Promise<{ rate: number; successes: number }> {
  const probe = await runHttpLoad({ ...load, amount: load.connections * 4 });
  if (probe.ok === 0) throw new Error(`every request to ${load.url} failed: ${probe.failures}`);
  if (warmupSec === 0) return { rate: probe.rate, successes: probe.ok };
  const warmup = await runHttpLoad({ ...load, amount: amountFor(load, probe.rate, warmupSec) });
  return { rate: warmup.rate, successes: probe.ok + warmup.ok };
}

/**
 * Saturated measurements of several loads taking turns: `rounds` short rounds, a different load
 * first in each, each turn sized from that load's last rate (`rates`, updated in place). This
 * machine's speed drifts minute to minute; in turns, every load meets the same moments. Prints
 * each round's rates; returns each load's measurements, in round order.
 */
export async function inTurns<F extends string>(
  loads: Record<F, Omit<HttpLoad, 'amount'>>,
  rates: Record<F, number>,
  options: { rounds: number; roundSec: number; beforeTurn?: (face: F) => Promise<void> },
): Promise<Record<F, Measurement[]>> {
  const faces = Object.keys(loads) as F[];
  const turns = Object.fromEntries(faces.map((face) => [face, [] as Measurement[]])) as Record<F, Measurement[]>;
  for (let round = 0; round < options.rounds; round++) {
    for (const face of faces.map((_, i) => faces[(i + round) % faces.length]!)) {
      await options.beforeTurn?.(face);
      const m = await runHttpLoad({ ...loads[face], amount: amountFor(loads[face], rates[face], options.roundSec) });
      rates[face] = m.rate;
      turns[face].push(m);
    }
    process.stdout.write(`  round ${round + 1}: ${faces.map((face) => `${face} ${turns[face][round]!.rate.toFixed(0)} req/s`).join(', ')}\n`);
  }
  return turns;
}

/** How many requests last about `seconds` at `rate`. */
export function amountFor(load: Pick<HttpLoad, 'connections'>, rate: number, seconds: number): number {
  return Math.max(load.connections, Math.round(rate * seconds));
}

/**
 * Runs `load` for about `durationSec` after warming up. Returns the measured run and the
 * successes of all runs (for the ledger check).
 */
export async function runHttpPhase(
  load: Omit<HttpLoad, 'amount'>,
  durationSec: number,
  warmupSec: number,
): Promise<{ measured: Measurement; successes: number }> {
  const { rate, successes } = await warmUp(load, warmupSec);
  const measured = await runHttpLoad({ ...load, amount: amountFor(load, rate, durationSec) });
  return { measured, successes: successes + measured.ok };
}

/**
 * Open-loop load: requests start on a fixed schedule, `rate` per second, whether or not earlier
 * ones have been answered, and each latency counts from its scheduled start. This is the latency
 * a client sees at a load the server keeps up with. (autocannon's own rate option sends each
 * second's quota in a burst at the start of the second, which measures the burst's queue.)
 */
export async function runOpenLoop(load: Omit<HttpLoad, 'amount'> & { rate: number; durationSec: number; slowMs?: number }): Promise<Measurement> {
  const pool = new Pool(new URL(load.url).origin, { connections: load.connections });
  const { pathname, search } = new URL(load.url);
  const total = Math.round(load.rate * load.durationSec);
  const latencies: number[] = [];
  /** When each measured request was due, in ms from the start (for slowEpisodes). */
  const sentAt: number[] = [];
  let failed = 0;
  const inFlight: Array<Promise<void>> = [];
  const started = performance.now();
  const startedAt = Date.now();
  const send = async (scheduled: number) => {
    try {
      const res = await pool.request({ method: load.method ?? 'POST', path: pathname + search, headers: load.headers, body: load.body?.() });
      await res.body.dump();
      if (res.statusCode >= 200 && res.statusCode < 300) {
        latencies.push(performance.now() - scheduled);
        sentAt.push(scheduled - started);
      } else failed++;
    } catch {
      failed++;
    }
  };
  let sent = 0;
  while (sent < total) {
    // Every request whose start time has come, then a short sleep: at most a millisecond late.
    const now = performance.now();
    while (sent < total && started + (sent * 1000) / load.rate <= now) {
      inFlight.push(send(started + (sent * 1000) / load.rate));
      sent++;
    }
    await sleep(1);
  }
  await Promise.all(inFlight);
  const durationSec = (performance.now() - started) / 1000;
  await pool.close();
  const slow = load.slowMs === undefined ? {} : { slow: slowEpisodes(sentAt, latencies, load.slowMs, startedAt) };
  return { rate: latencies.length / durationSec, ...summarize(latencies), ok: latencies.length, failed, durationSec, latencies, ...slow };
}
