// Exports: a shop's customers and its ledger as CSV for spreadsheets, streamed a keyset page at a
// time, with the column names Smile's and LoyaltyLion's exports use where they mean the same.

export { type Cell, csvField, csvRecord } from './csv.js';
export { CUSTOMER_COLUMNS, customersCsv, EXPORT_PAGE } from './customers-export.js';
export { LEDGER_COLUMNS, ledgerCsv, type LedgerRange, ledgerRangeSchema, parseLedgerRange } from './ledger-export.js';
