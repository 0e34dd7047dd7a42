import { createReadStream } from 'node:fs';
import { open } from 'node:fs/promises';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { parse as parseCsv } from 'csv-parse/sync';
import type { ImportRecord, PeerSource } from '../domain/imports/index.js';

export type ImportFormat = 'ndjson' | 'csv';

/**
 * An import's CSV columns: which exist, which must, which hold numbers and which JSON (a list in one
 * cell). `fieldOf` reads another program's export, whose headers name the fields its own way and
 * carry columns we do not read: it gives a header's field (one of `all`), or undefined to skip the
 * column. Without it a header is the field's own name and an unknown one refuses the file.
 */
export type ImportColumns = {
  all: readonly string[];
  required: readonly string[];
  numeric: readonly string[];
  json: readonly string[];
  fieldOf?: (header: string) => string | undefined;
  /** How a missing required field is named to the user: the headers that carry it. */
  headersOf?: (field: string) => readonly string[];
};

export const CUSTOMER_COLUMNS: ImportColumns = {
  all: ['shopifyCustomerId', 'email', 'points', 'birthday', 'referredBy'],
  required: ['shopifyCustomerId', 'email'],
  numeric: ['points'],
  json: [],
};

/** An order per row: the body of PUT /orders/{orderId}, its line items as a JSON list. Money stays text. */
export const ORDER_COLUMNS: ImportColumns = {
  all: ['orderId', 'customerIdentifier', 'currency', 'subtotal', 'shipping', 'tax', 'total', 'refunded', 'status', 'lineItems', 'processedAt', 'sourceUpdatedAt'],
  required: ['orderId', 'customerIdentifier', 'currency', 'subtotal', 'total', 'status', 'lineItems'],
  numeric: [],
  json: ['lineItems'],
};

/** A header as a key: lowercased, each run of other characters than letters and digits one `_` ("Points Balance" → points_balance). */
const headerKey = (header: string) => header.trim().toLowerCase().replace(/[^a-z0-9]+/g, '_').replace(/^_|_$/g, '');

/**
 * A peer's export, read by the headers it may carry for each field (docs/operations.md "Moving in
 * from Smile.io or LoyaltyLion" says where they come from).
 */
function peerColumns(headers: Record<string, readonly string[]>): ImportColumns {
  const fieldByKey = new Map(Object.entries(headers).flatMap(([field, keys]) => keys.map((key) => [key, field] as const)));
  return {
    all: Object.keys(headers),
    required: ['email', 'points'],
    numeric: ['points', 'pointsSpent', 'pointsPending'],
    json: [],
    fieldOf: (header) => fieldByKey.get(headerKey(header)),
    headersOf: (field) => headers[field] ?? [],
  };
}

/** The customer exports of Smile.io and LoyaltyLion: their columns, onto the peer import's fields. */
export const PEER_COLUMNS: Record<PeerSource, ImportColumns> = {
  smile: peerColumns({
    email: ['email', 'email_address'],
    birthday: ['date_of_birth', 'birthday'],
    points: ['points_balance'],
    pointsSpent: ['points_spent'],
    tier: ['vip_tier', 'vip_tier_name'],
    referralUrl: ['referral_url'],
  }),
  loyaltylion: peerColumns({
    email: ['email', 'email_address'],
    customerId: ['merchant_id'],
    birthday: ['birthday', 'date_of_birth'],
    points: ['points_approved'],
    pointsPending: ['points_pending'],
    pointsSpent: ['points_spent'],
    tier: ['tier', 'loyalty_tier', 'tier_name'],
    referralUrl: ['referral_url', 'referral_link'],
  }),
};

/** The file itself is unusable (unknown columns, no header): nothing is imported. */
export class ImportFileError extends Error {
  readonly code = 'invalid_file';
}

/** NDJSON for .ndjson/.jsonl, CSV for .csv; otherwise NDJSON when the first non-blank character is `{`. */
export async function detectFormat(file: string): Promise<ImportFormat> {
  const ext = path.extname(file).toLowerCase();
  if (ext === '.ndjson' || ext === '.jsonl') return 'ndjson';
  if (ext === '.csv') return 'csv';
  const handle = await open(file, 'r');
  try {
    const { buffer, bytesRead } = await handle.read(Buffer.alloc(4096), 0, 4096, 0);
    const head = buffer.subarray(0, bytesRead).toString('utf8').replace(/^\uFEFF/, '').trimStart();
    return head.startsWith('{') ? 'ndjson' : 'csv';
  } finally {
    await handle.close();
  }
}

/**
 * The records of an import file, each with the line it starts on; lines that cannot be parsed carry
 * an error. `parseJson` reads an NDJSON line (the orders import reads Shopify's ids past 2^53 whole).
 */
export async function* readImportFile(
  file: string,
  format: ImportFormat,
  columns: ImportColumns = CUSTOMER_COLUMNS,
  parseJson: (text: string) => unknown = JSON.parse,
): AsyncGenerator<ImportRecord> {
  yield* format === 'ndjson' ? ndjsonRecords(readLines(file), parseJson) : csvRecords(readLines(file), columns);
}

/** Records in the file, for a progress bar's total: its lines, less a CSV's header. */
export async function countRecords(file: string, format: ImportFormat): Promise<number> {
  const lines = await countLines(file);
  return format === 'csv' ? Math.max(0, lines - 1) : lines;
}

async function countLines(file: string): Promise<number> {
  let lines = 0;
  let last = 0x0a;
  for await (const chunk of createReadStream(file) as AsyncIterable<Buffer>) {
    for (let i = chunk.indexOf(0x0a); i !== -1; i = chunk.indexOf(0x0a, i + 1)) lines++;
    if (chunk.length) last = chunk[chunk.length - 1]!;
  }
  return last === 0x0a ? lines : lines + 1;
}

async function* readLines(file: string): AsyncGenerator<{ line: number; text: string }> {
  const lines = createInterface({ input: createReadStream(file, 'utf8'), crlfDelay: Infinity });
  let line = 0;
  for await (const text of lines) {
    line++;
    yield { line, text: line === 1 ? text.replace(/^\uFEFF/, '') : text };
  }
}

async function* ndjsonRecords(lines: AsyncIterable<{ line: number; text: string }>, parseJson: (text: string) => unknown): AsyncGenerator<ImportRecord> {
  for await (const { line, text } of lines) {
    if (text.trim() === '') continue;
    try {
      yield { line, value: parseJson(text) };
    } catch (err) {
      yield { line, error: `malformed JSON: ${(err as Error).message}` };
    }
  }
}

/**
 * CSV with a header row. Records are cut at line ends that are outside a quoted field, and each
 * is parsed on its own, so a malformed line is rejected alone instead of derailing the rest of
 * the file (csv-parse's streaming recovery can swallow the lines after a bad quote).
 */
async function* csvRecords(lines: AsyncIterable<{ line: number; text: string }>, columns: ImportColumns): AsyncGenerator<ImportRecord> {
  let header: Array<string | undefined> | undefined;
  let pending: { line: number; text: string } | undefined;
  let lastLine = 0;

  for await (const { line, text } of lines) {
    lastLine = line;
    const record = pending ? { line: pending.line, text: `${pending.text}\n${text}` } : { line, text };
    if (endsInsideQuotes(text, pending !== undefined)) {
      pending = record;
      continue;
    }
    pending = undefined;
    if (record.text.trim() === '') continue;

    let cells: string[];
    try {
      cells = record.text.includes('"')
        ? ((parseCsv(record.text, { trim: true, relax_column_count: true, record_delimiter: '\n' }) as string[][])[0] ?? [])
        : splitPlainRecord(record.text);
    } catch (err) {
      const problem = `malformed CSV: ${(err as Error).message.replace(/ at line \d+/, '')}`;
      if (!header) throw new ImportFileError(`the CSV header on line ${record.line} is unreadable: ${problem}`);
      yield { line: record.line, error: problem };
      continue;
    }
    if (!header) {
      header = checkHeader(cells, columns);
      continue;
    }
    if (cells.length !== header.length) {
      yield { line: record.line, error: `expected ${header.length} columns as in the header, got ${cells.length}` };
      continue;
    }
    yield { line: record.line, value: csvRowToObject(header, cells, columns) };
  }

  if (pending) {
    const span = lastLine > pending.line ? `lines ${pending.line}-${lastLine}` : `line ${pending.line}`;
    yield { line: pending.line, error: `malformed CSV: a quoted field opened here is never closed (${span} not imported)` };
  }
}

/**
 * A record without a quote, cut at its commas and trimmed as csv-parse's `trim` does (its left trim
 * takes these five characters, its right trim JavaScript's): the same cells, without a parser made
 * per line, which cost more than everything else the import does in this process.
 */
function splitPlainRecord(text: string): string[] {
  return text.split(',').map((cell) => cell.replace(/^[\r\n\f \t]+/, '').trimEnd());
}

/** The field each column holds (undefined: a column the import skips), the header checked. */
function checkHeader(cells: string[], columns: ImportColumns): Array<string | undefined> {
  const known = new Set<string>(columns.all);
  const { fieldOf } = columns;
  if (!fieldOf) {
    const unknown = cells.filter((c) => !known.has(c));
    if (unknown.length > 0) {
      throw new ImportFileError(
        `unknown column(s) ${unknown.map((c) => `"${c}"`).join(', ')} in the CSV header; expected ${columns.all.join(', ')}`,
      );
    }
  }
  const fields = fieldOf ? cells.map(fieldOf) : cells;
  const repeated = fields.findIndex((f, i) => f !== undefined && fields.indexOf(f) !== i);
  if (repeated !== -1) {
    const same = fields.indexOf(fields[repeated]);
    const named = cells[same] === cells[repeated] ? `column "${cells[repeated]}" appears twice` : `columns "${cells[same]}" and "${cells[repeated]}" both hold ${fields[repeated]}`;
    throw new ImportFileError(`${named} in the CSV header`);
  }
  const missing = columns.required.filter((c) => !fields.includes(c));
  if (missing.length > 0) {
    const named = columns.headersOf ? missing.map((c) => `${c} (${columns.headersOf!(c).join(' or ')})`) : missing;
    throw new ImportFileError(`the CSV header lacks the column(s) ${named.join(', ')}`);
  }
  return fields;
}

/**
 * Empty cells are absent values. A numeric column becomes a number when it looks like one, a JSON
 * column its parsed value when it parses; otherwise both stay text, for the validator to refuse.
 */
function csvRowToObject(header: Array<string | undefined>, cells: string[], columns: ImportColumns): Record<string, unknown> {
  const value: Record<string, unknown> = {};
  header.forEach((column, i) => {
    const cell = cells[i]!;
    if (column === undefined || cell === '') return;
    if (columns.numeric.includes(column) && /^[-+]?\d+(\.\d+)?$/.test(cell)) value[column] = Number(cell);
    else if (columns.json.includes(column)) value[column] = parseJsonCell(cell);
    else value[column] = cell;
  });
  return value;
}

function parseJsonCell(cell: string): unknown {
  try {
    return JSON.parse(cell);
  } catch {
    return cell;
  }
}

/**
 * Whether a CSV line ends inside a quoted field (so the record continues on the next line).
 * A quote opens a field only at its start; a doubled quote inside a quoted field is a literal one.
 */
function endsInsideQuotes(line: string, startsInside: boolean): boolean {
  if (!startsInside && !line.includes('"')) return false;
  let inside = startsInside;
  let atFieldStart = !startsInside;
  for (let i = 0; i < line.length; i++) {
    const c = line[i];
    if (inside) {
      if (c === '"') {
        if (line[i + 1] === '"') i++;
        else inside = false;
      }
    } else if (c === ',') {
      atFieldStart = true;
    } else if (c === '"' && atFieldStart) {
      inside = true;
      atFieldStart = false;
    } else if (c !== ' ' && c !== '\t') {
      atFieldStart = false;
    }
  }
  return inside;
}
