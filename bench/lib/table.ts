import { combine, type Measurement } from './load.js';

/** A plain-text table with aligned columns (numbers right, text left). */
export function formatTable(header: string[], rows: Array<Array<string | number>>): string {
  const cells = [header, ...rows.map((r) => r.map(String))];
  const widths = header.map((_, i) => Math.max(...cells.map((r) => (r[i] ?? '').length)));
  const numeric = header.map((_, i) => rows.every((r) => typeof r[i] === 'number' || /^([\d.,]+( ms| %)?|-)$/.test(String(r[i]))));
  const line = (r: string[]) =>
    r.map((c, i) => (numeric[i] ? c.padStart(widths[i]!) : c.padEnd(widths[i]!))).join('  ').trimEnd();
  const rule = widths.map((w) => '-'.repeat(w)).join('  ');
  return [line(header), rule, ...cells.slice(1).map(line)].join('\n');
}

export const fmt = {
  rate: (n: number) => n.toFixed(0),
  ms: (n: number) => `${n.toFixed(1)} ms`,
  ratio: (n: number) => n.toFixed(2),
};

/** A scenario's correctness checks, one line each. */
export function formatChecks(checks: ReadonlyArray<{ name: string; ok: boolean; detail: string }>): string[] {
  return checks.map((c) => `  ${c.ok ? 'ok  ' : 'FAIL'} ${c.name}: ${c.detail}`);
}

/**
 * A target row for a rate ratio of two loads measured in turns (inTurns): the ratio of their
 * combined rates, the range of the per-round ratios, the target (at least `target`) and whether it was met.
 */
export function rateRatioRow(label: string, of: Measurement[], to: Measurement[], target: number): string[] {
  const ratio = combine(of).rate / combine(to).rate;
  const perRound = of.map((m, i) => m.rate / to[i]!.rate);
  return [label, fmt.ratio(ratio), `${fmt.ratio(Math.min(...perRound))}-${fmt.ratio(Math.max(...perRound))}`, `>= ${target}`, ratio >= target ? 'met' : 'MISSED'];
}

type Check = { name: string; ok: boolean; detail: string };

/**
 * A scenario's closing report: its measured requests, its targets (met or MISSED) and its
 * correctness checks. Resolves to whether every check passed (a missed target is reported, not failed).
 */
export function printReport(report: { requests: Array<Array<string | number>>; targets: Array<Array<string | number>>; checks: Check[] }): boolean {
  process.stdout.write(
    [
      '',
      formatTable(['request', 'req/s', 'p50', 'p99', 'ok', 'failed'], report.requests),
      '',
      formatTable(['target', 'value', 'per round', 'target', 'result'], report.targets),
      '',
      ...formatChecks(report.checks),
      '',
    ].join('\n'),
  );
  return report.checks.every((c) => c.ok);
}
