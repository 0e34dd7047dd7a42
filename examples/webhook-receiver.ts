// A webhook receiver: verifies each delivery's Standard Webhooks signature (docs/webhooks.md) and
// prints each event once, although the service delivers at least once (retries and replays
// repeat the same `webhook-id`).
//
//   LOYALTY_WEBHOOK_SECRET=<64 hex from webhookSubscriptionCreate> PORT=8080 \
//     node --import tsx examples/webhook-receiver.ts
//
// The service only calls https:// URLs, so run it behind your HTTPS endpoint (a reverse proxy, a
// tunnel), or give it a certificate with TLS_KEY=key.pem TLS_CERT=cert.pem to serve HTTPS itself.
// For a receiver on your own machine the server needs WEBHOOK_ALLOWED_HOSTS=localhost, and, for
// a self-signed certificate, NODE_EXTRA_CA_CERTS=cert.pem.
//
// Prints `<topic> <webhook-id> <data as JSON>` per new event on stdout; duplicates and refused
// requests go to stderr.
import { readFileSync } from 'node:fs';
import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import { Webhook } from 'standardwebhooks';

const secret = process.env.LOYALTY_WEBHOOK_SECRET;
if (!secret || !/^[0-9a-f]{64}$/i.test(secret)) {
  console.error('usage: LOYALTY_WEBHOOK_SECRET=<64 hex characters> [PORT=8080] [TLS_KEY=… TLS_CERT=…] node --import tsx examples/webhook-receiver.ts');
  process.exit(64);
}
const port = Number(process.env.PORT ?? 8080);

// Our secrets are used as they are (their UTF-8 bytes), not base64-decoded: hence `format: 'raw'`.
const webhook = new Webhook(secret, { format: 'raw' });

// The ids already handled. In production this is a unique key in your database, written in the
// same transaction as the event's effect; an in-memory set forgets them on restart.
const seen = new Set<string>();

type LoyaltyEvent = { id: string; type: string; timestamp: string; shopId: string; data: unknown };

function handle(req: IncomingMessage, res: ServerResponse): void {
  if (req.method !== 'POST') {
    res.writeHead(405, { allow: 'POST' }).end();
    return;
  }
  const chunks: Buffer[] = [];
  req.on('data', (chunk: Buffer) => chunks.push(chunk));
  req.on('end', () => {
    // Verify the bytes as received: parsing and re-serialising the JSON would change them.
    const body = Buffer.concat(chunks).toString('utf8');
    const headers = Object.fromEntries(Object.entries(req.headers).map(([k, v]) => [k, String(v)]));
    let event: LoyaltyEvent;
    try {
      // Checks the signature and that webhook-timestamp is within 5 minutes of our clock.
      event = webhook.verify(body, headers) as LoyaltyEvent;
    } catch (err) {
      console.error(`refused: ${(err as Error).message}`);
      res.writeHead(400, { 'content-type': 'text/plain' }).end('invalid signature');
      return;
    }
    const id = headers['webhook-id']!;
    if (seen.has(id)) {
      console.error(`duplicate ${id} ignored`);
    } else {
      seen.add(id);
      // Hand the event to your own queue here and answer at once: only a 2xx within 15 s counts.
      console.log(`${event.type} ${id} ${JSON.stringify(event.data)}`);
    }
    // A duplicate is a success too: answering an error would make the service try again.
    res.writeHead(204).end();
  });
}

const tls = process.env.TLS_KEY && process.env.TLS_CERT
  ? { key: readFileSync(process.env.TLS_KEY), cert: readFileSync(process.env.TLS_CERT) }
  : undefined;
const server = tls ? https.createServer(tls, handle) : http.createServer(handle);
server.listen(port, process.env.HOST ?? '127.0.0.1', () => {
  const { address, port: bound } = server.address() as AddressInfo;
  console.error(`listening on ${tls ? 'https' : 'http'}://${address}:${bound}`);
});

for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    server.closeAllConnections();
    server.close(() => process.exit(0));
  });
}
