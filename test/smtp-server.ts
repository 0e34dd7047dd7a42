import { createServer, type Server, type Socket } from 'node:net';
import { type ParsedMail, simpleParser } from 'mailparser';
import { SMTPServer } from 'smtp-server';

/**
 * A real SMTP server on a loopback port for the mail tests (and the mail bench): it takes every
 * message, parses it back with mailparser, and answers a recipient as `answerRecipient` says
 * (a code and text to refuse with, or nothing to accept).
 */
export type TestSmtp = {
  port: number;
  received: ParsedMail[];
  /** When each of `received` arrived (ms since the epoch). */
  receivedAt: number[];
  /** Raw envelopes: who each message was sent to. */
  recipients: string[];
  answerRecipient: (address: string) => { code: number; message: string } | undefined;
  /** How long the server takes to answer a message it has taken (a slow server; a client killed meanwhile never hears it). */
  answerDelayMs: number;
  /** Errors on client connections (a client reset mid-message), kept for the tests to read. */
  connectionErrors: Error[];
  close(): Promise<void>;
};

export async function startSmtp(): Promise<TestSmtp> {
  const smtp: TestSmtp = {
    port: 0,
    received: [],
    receivedAt: [],
    recipients: [],
    answerRecipient: () => undefined,
    answerDelayMs: 0,
    connectionErrors: [],
    close: async () => {},
  };
  const server = new SMTPServer({
    authOptional: true,
    disabledCommands: ['STARTTLS', 'AUTH'],
    logger: false,
    onRcptTo(address, _session, callback) {
      const refusal = smtp.answerRecipient(address.address);
      if (!refusal) return callback();
      const err = Object.assign(new Error(refusal.message), { responseCode: refusal.code });
      return callback(err);
    },
    onData(stream, session, callback) {
      simpleParser(stream)
        .then((mail) => {
          smtp.received.push(mail);
          smtp.receivedAt.push(Date.now());
          smtp.recipients.push(...session.envelope.rcptTo.map((r) => r.address));
          if (smtp.answerDelayMs > 0) setTimeout(() => callback(), smtp.answerDelayMs);
          else callback();
        })
        .catch(callback);
    },
  });
  // A client that dies mid-conversation (kill -9 of an instance) resets its connection; smtp-server
  // reports that as the server's 'error', which without a listener would crash the test process.
  server.on('error', (err) => smtp.connectionErrors.push(err));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  smtp.port = (server.server.address() as { port: number }).port;
  smtp.close = () => new Promise<void>((resolve) => server.close(() => resolve()));
  return smtp;
}

/** A server that takes connections and never says a word: an SMTP server that hangs. */
export async function startHungSmtp(): Promise<{ port: number; connections: () => number; close(): Promise<void> }> {
  const sockets = new Set<Socket>();
  let count = 0;
  const server: Server = createServer((socket) => {
    count++;
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => {});
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as { port: number }).port,
    connections: () => count,
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}
