import type { FastifyInstance, FastifyReply } from 'fastify';

/** A file of a page: its bytes (or how to load them on the first request) and its type. */
export type PageFile = { body: string | Buffer | (() => Promise<string | Buffer>); type: string };

export const HTML = 'text/html; charset=utf-8';
export const JS = 'text/javascript; charset=utf-8';
export const CSS = 'text/css; charset=utf-8';

/**
 * The headers of the pages (/docs, /dashboard, /graphql) and of every file they load. Scripts are
 * files of this origin, never inline (`script-src 'self'`), so the API key typed into a page can
 * go nowhere else; no other site may frame a page (`frame-ancestors 'none'`, and X-Frame-Options
 * for browsers without CSP), so none can trick a user into clicking in it. `sources` are the
 * page's own directives beside `default-src 'none'`.
 */
export function pageHeaders(sources: string): Record<string, string> {
  return {
    'content-security-policy': `default-src 'none'; ${sources}; base-uri 'none'; form-action 'none'; frame-ancestors 'none'`,
    'x-frame-options': 'DENY',
    'x-content-type-options': 'nosniff',
    'referrer-policy': 'no-referrer',
    'cache-control': 'no-cache',
  };
}

/** Sends one page file with the page's headers. */
export async function sendPageFile(reply: FastifyReply, file: PageFile, headers: Record<string, string>) {
  const body = typeof file.body === 'function' ? await file.body() : file.body;
  return reply.headers(headers).type(file.type).send(body);
}

/** GET routes for a page's files, each answered with the page's headers. */
export function registerPageFiles(app: FastifyInstance, files: Record<string, PageFile>, headers: Record<string, string>): void {
  for (const [url, file] of Object.entries(files)) {
    app.get(url, async (_request, reply) => sendPageFile(reply, file, headers));
  }
}
