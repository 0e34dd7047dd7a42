// Run by the memory scenario as `node --import tsx bench/lib/memory-stages.ts` with DATA_DIR set to
// an existing embedded data folder: does what `npm start` does, step by step, and prints one JSON
// line of process.memoryUsage() per step, then the WASM memory's resident part. What each step adds
// to the resident set is the breakdown of the server's memory at idle.
import { readFileSync } from 'node:fs';

type Stage = { stage: string; rss: number; heapUsed: number; heapTotal: number; external: number; arrayBuffers: number; wasmResident?: number };

const print = (stage: Stage) => process.stdout.write(`${JSON.stringify(stage)}\n`);
const usage = (stage: string): Stage => ({ stage, ...process.memoryUsage() });

/**
 * PGlite's WASM memory is one anonymous mapping the size of the memory (counted in `external`);
 * its resident part is the mapping's Rss in smaps, taken here from the mapping closest in size.
 */
function wasmResident(wasmBytes: number): number | undefined {
  let best: { size: number; rss: number } | undefined;
  let current: { size: number; rss: number; anon: boolean } | undefined;
  for (const line of readFileSync('/proc/self/smaps', 'utf8').split('\n')) {
    const range = /^([0-9a-f]+)-([0-9a-f]+) rw-p 00000000 00:00 0\s*$/.exec(line);
    if (/^[0-9a-f]+-[0-9a-f]+ /.test(line)) current = range ? { size: Number.parseInt(range[2]!, 16) - Number.parseInt(range[1]!, 16), rss: 0, anon: true } : undefined;
    else if (current && line.startsWith('Rss:')) {
      current.rss = Number(line.split(/\s+/)[1]) * 1024;
      if (current.size <= wasmBytes && (!best || Math.abs(wasmBytes - current.size) < Math.abs(wasmBytes - best.size))) best = current;
    }
  }
  return best && best.size > wasmBytes / 2 ? best.rss : undefined;
}

const base = usage('node + tsx');
print(base);
const { buildApp } = await import('../../src/app.js');
const { loadConfig } = await import('../../src/config.js');
print(usage('modules loaded'));
const app = await buildApp(loadConfig());
await new Promise((resolve) => setTimeout(resolve, 2_000));
const built = usage('app built (PGlite open)');
// WASM memory and the modules' own buffers are both `external`; the buffers are arrayBuffers.
print({ ...built, wasmResident: wasmResident(built.external - built.arrayBuffers - (base.external - base.arrayBuffers)) });
await app.stop();
