import { Readable } from 'node:stream';
import type { FastifyInstance, FastifyReply } from 'fastify';
import type { DB } from '../db/database.js';
import { customersCsv, ledgerCsv, parseLedgerRange } from '../domain/exports/index.js';

/**
 * Streams CSV chunks as the client reads them: the stream pulls the next page only when the
 * socket has taken the last one (backpressure), so memory holds a page whatever the export's size.
 */
function sendCsv(reply: FastifyReply, filename: string, chunks: AsyncIterable<string>) {
  return reply
    .type('text/csv; charset=utf-8')
    .header('content-disposition', `attachment; filename="${filename}"`)
    .header('cache-control', 'no-store')
    .send(Readable.from(chunks, { objectMode: false }));
}

/** The exports a signed-in person may download with their session's cookie (the console's links). */
export const SESSION_DOWNLOADS = ['/exports/customers.csv', '/exports/ledger.csv'] as const;

const today = () => new Date().toISOString().slice(0, 10);

/** GET /exports/customers.csv and GET /exports/ledger.csv?from=&to= (docs/api.md "Exports"). */
export function registerExportRoutes(app: FastifyInstance, db: DB): void {
  app.get('/exports/customers.csv', (request, reply) => sendCsv(reply, `customers-${today()}.csv`, customersCsv(db, request.shop!.id)));
  app.get('/exports/ledger.csv', (request, reply) => {
    // Parsed before anything is sent: bad parameters are a 400 in the error envelope, not a broken file.
    const range = parseLedgerRange(request.query);
    const day = (at: Date) => at.toISOString().slice(0, 10);
    return sendCsv(reply, `ledger-${day(range.from)}-${day(range.to)}.csv`, ledgerCsv(db, request.shop!.id, range));
  });
}
