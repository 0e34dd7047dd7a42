/** A cell: text from the data (guarded, quoted as needed), a number, or nothing (an empty cell). */
export type Cell = string | number | null;

// A spreadsheet reads a cell starting with one of these as a formula (or, tab and CR, may drop
// them and read the rest as one): text from customers' or staff's data must not run as one.
const FORMULA_START = /^[=+\-@\t\r]/;
// RFC 4180: a field with a quote, a comma or a line break is quoted, its quotes doubled.
const NEEDS_QUOTES = /[",\r\n]/;

/**
 * One CSV field. Text that a spreadsheet would take for a formula gets a leading `'` (OWASP's
 * advice for CSV injection); numbers are ours, never guarded, so "-20" stays a number.
 */
export function csvField(cell: Cell): string {
  if (cell === null) return '';
  if (typeof cell === 'number') return String(cell);
  const text = FORMULA_START.test(cell) ? `'${cell}` : cell;
  return NEEDS_QUOTES.test(text) ? `"${text.replaceAll('"', '""')}"` : text;
}

/** One record, CRLF-terminated as RFC 4180 has it. */
export function csvRecord(cells: readonly Cell[]): string {
  return `${cells.map(csvField).join(',')}\r\n`;
}
