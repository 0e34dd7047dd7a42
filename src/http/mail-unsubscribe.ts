import type { FastifyPluginAsync, FastifyReply } from 'fastify';
import type { DB } from '../db/database.js';
import { readUnsubscribeToken, unsubscribeByToken } from '../domain/mail/index.js';
import { HTML, pageHeaders } from './page-files.js';

/**
 * The unsubscribe link of every e-mail (issue 36, item 3), for people who are not signed in:
 * GET shows a page with one button (a mail client's link preview must not unsubscribe anyone),
 * POST unsubscribes. Mail clients post the one-click body of RFC 8058
 * (`List-Unsubscribe=One-Click`, form-encoded) to the same URL; the token in the query is all
 * that counts, so any body of any type is taken.
 */
const HEADERS = { ...pageHeaders("style-src 'none'"), 'content-security-policy': "default-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'" };

const page = (title: string, body: string) =>
  `<!doctype html>\n<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width"><title>${title}</title></head>` +
  `<body><h1>${title}</h1>${body}</body></html>\n`;

const INVALID = page('This link is not valid', '<p>The unsubscribe link is incomplete or was changed. Use the link of the e-mail as it came.</p>');

function send(reply: FastifyReply, status: number, html: string) {
  return reply.code(status).headers(HEADERS).type(HTML).send(html);
}

export const mailUnsubscribeRoutes: FastifyPluginAsync<{ db: DB; tokenKey: Buffer; now: () => Date }> = async (app, { db, tokenKey, now }) => {
  app.addContentTypeParser('*', { parseAs: 'buffer', bodyLimit: 4096 }, (_request, _body, done) => done(null, undefined));
  const tokenOf = (query: unknown) => {
    const token = (query as { token?: unknown }).token;
    return typeof token === 'string' ? token : '';
  };
  app.get('/mail/unsubscribe', async (request, reply) => {
    const token = tokenOf(request.query);
    if (!readUnsubscribeToken(tokenKey, token)) return send(reply, 400, INVALID);
    // The token goes back in the form's action, where only characters of base64url and dots can be.
    return send(
      reply,
      200,
      page(
        'Unsubscribe',
        `<p>Stop receiving e-mails about your loyalty points from this shop?</p><form method="post" action="?token=${encodeURIComponent(token)}"><button type="submit">Unsubscribe</button></form>`,
      ),
    );
  });
  app.post('/mail/unsubscribe', async (request, reply) => {
    const done = await unsubscribeByToken(db, tokenKey, tokenOf(request.query), now());
    if (!done) return send(reply, 400, INVALID);
    return send(reply, 200, page('You are unsubscribed', '<p>You will receive no more e-mails about your loyalty points from this shop.</p>'));
  });
};
