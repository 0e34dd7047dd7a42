import { readFileSync } from 'node:fs';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { Webhook } from 'standardwebhooks';

export type ReceivedRequest = { headers: Record<string, string>; body: string; receivedAt: number; path: string };

/** Answers one request; the default answers 204. It may also hang or destroy the socket. */
export type ReceiverHandler = (req: IncomingMessage, res: ServerResponse, received: ReceivedRequest) => void;

export type Receiver = {
  /** https://localhost:<port>/hook: WEBHOOK_ALLOWED_HOSTS=localhost lets the service send here. */
  url: string;
  port: number;
  requests: ReceivedRequest[];
  handle(handler: ReceiverHandler): void;
  /** Resolves once `count` requests have arrived (or rejects after `timeoutMs`). */
  waitFor(count: number, timeoutMs?: number): Promise<ReceivedRequest[]>;
  close(): Promise<void>;
};

/** A real HTTPS receiver on loopback, with the certificate test/global-setup.ts made. */
export async function startReceiver(handler?: ReceiverHandler): Promise<Receiver> {
  let current: ReceiverHandler = handler ?? ((_req, res) => res.writeHead(204).end());
  const requests: ReceivedRequest[] = [];
  const waiters: Array<() => void> = [];
  const server = https.createServer(
    { key: readFileSync(process.env.TEST_TLS_KEY!), cert: readFileSync(process.env.TEST_TLS_CERT!) },
    (req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const received: ReceivedRequest = {
          headers: Object.fromEntries(Object.entries(req.headers).map(([k, v]) => [k, String(v)])),
          body: Buffer.concat(chunks).toString('utf8'),
          receivedAt: Date.now(),
          path: req.url ?? '',
        };
        requests.push(received);
        for (const wake of waiters.splice(0)) wake();
        current(req, res, received);
      });
    },
  );
  server.keepAliveTimeout = 60_000;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `https://localhost:${port}/hook`,
    port,
    requests,
    handle(next) {
      current = next;
    },
    async waitFor(count, timeoutMs = 10_000) {
      const deadline = Date.now() + timeoutMs;
      while (requests.length < count) {
        const left = deadline - Date.now();
        if (left <= 0) throw new Error(`receiver: ${requests.length} of ${count} requests after ${timeoutMs} ms`);
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, Math.min(left, 250));
          waiters.push(() => {
            clearTimeout(timer);
            resolve();
          });
        });
      }
      return requests.slice(0, count);
    },
    close() {
      server.closeAllConnections();
      return new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** What a receiver following docs/webhooks.md does: verify with the raw-format secret, or throw. */
export function verifyDelivery(secret: string, request: ReceivedRequest): unknown {
  return new Webhook(secret, { format: 'raw' }).verify(request.body, request.headers);
}
