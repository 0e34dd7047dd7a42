// The CSV reader cuts lines without a quote itself (a csv-parse parser per line cost more than the
// rest of an import): for such lines its cells must be csv-parse's own, trimming included.
import { writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { parse as parseCsv } from 'csv-parse/sync';
import { describe, expect, it } from 'vitest';
import { readImportFile } from '../src/cli/import-file.js';

const LINES = [
  'a,b,c',
  '  a , b\t,\tc  ',
  ',,',
  'a,,c,',
  '\fa,b\f,c',
  '\u00a0a\u00a0,b,c', // csv-parse keeps a leading no-break space and drops a trailing one
  'ümlaut,日本,😀',
  "it's,a,b",
];

describe('CSV lines without quotes', () => {
  it('come out as csv-parse reads them, cell for cell', async () => {
    const file = path.join(os.tmpdir(), `import-file-${process.pid}.csv`);
    const header = 'shopifyCustomerId,email,birthday';
    await writeFile(file, `${header}\n${LINES.join('\n')}\n`);
    const columns = { all: ['shopifyCustomerId', 'email', 'birthday', 'x'], required: [], numeric: [], json: [] };
    const read: unknown[] = [];
    for await (const record of readImportFile(file, 'csv', columns)) read.push(record);
    const expected = LINES.map((text, i) => {
      const cells = (parseCsv(text, { trim: true, relax_column_count: true }) as string[][])[0]!;
      if (cells.length !== 3) return { line: i + 2, error: `expected 3 columns as in the header, got ${cells.length}` };
      const value: Record<string, string> = {};
      ['shopifyCustomerId', 'email', 'birthday'].forEach((c, k) => cells[k] !== '' && (value[c] = cells[k]!));
      return { line: i + 2, value };
    });
    expect(read).toEqual(expected);
    expect(expected.filter((r) => 'value' in r)).toHaveLength(LINES.length - 1);
  });
});
