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
