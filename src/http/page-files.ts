import { createHash } from 'node:crypto';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';

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

/** A file's bytes and their ETag, made once per file. */
const loaded = new WeakMap<PageFile, Promise<{ body: string | Buffer; etag: string }>>();
function load(file: PageFile) {
  let done = loaded.get(file);
  if (!done) {
    done = (async () => {
      const body = typeof file.body === 'function' ? await file.body() : file.body;
      return { body, etag: `"${createHash('sha256').update(body).digest('base64url').slice(0, 27)}"` };
    })();
    loaded.set(file, done);
  }
  return done;
}

/**
 * Sends one page file with the page's headers. `no-cache` makes the browser ask again on every
 * view, and the ETag lets it keep what it has: GraphiQL's 9 MB bundle crosses the wire once.
 */
export async function sendPageFile(request: FastifyRequest, reply: FastifyReply, file: PageFile, headers: Record<string, string>) {
  const { body, etag } = await load(file);
  reply.headers(headers).header('etag', etag);
  if (request.headers['if-none-match'] === etag) return reply.code(304).send();
  return reply.type(file.type).send(body);
}

/** GET routes for a page's files, each answered with the page's headers. */
export function registerPageFiles(app: FastifyInstance, files: Record<string, PageFile>, headers: Record<string, string>): void {
  for (const [url, file] of Object.entries(files)) {
    app.get(url, async (request, reply) => sendPageFile(request, reply, file, headers));
  }
}
