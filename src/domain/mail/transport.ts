import nodemailer from 'nodemailer';
import type { OpenMailSettings } from './settings.js';

/**
 * The shop's SMTP server through nodemailer, every wait bounded by `timeoutMs` (connecting, the
 * greeting, each answer), so a server that hangs holds its own shop's mail only. Pooled: a busy
 * shop's messages reuse a few connections instead of a handshake each.
 */
export type MailTransport = { send(message: OutgoingMail): Promise<SendOutcome>; close(): void };

export type OutgoingMail = { to: string; subject: string; html: string; text: string; headers?: Record<string, string> };

/**
 * What the server answered. `permanent`: a 5xx, which another try will not change; `recipient`:
 * it was the recipient the server refused (RCPT TO), so that address is not to be mailed again.
 */
export type SendOutcome =
  | { ok: true; messageId: string; response: string }
  | { ok: false; permanent: boolean; recipient: boolean; code: number | null; response: string };

export function createMailTransport(settings: OpenMailSettings, options: { timeoutMs: number; maxConnections: number }): MailTransport {
  const transporter = nodemailer.createTransport({
    pool: true,
    maxConnections: options.maxConnections,
    host: settings.smtpHost,
    port: settings.smtpPort,
    secure: settings.smtpSecurity === 'tls',
    requireTLS: settings.smtpSecurity === 'starttls',
    ignoreTLS: settings.smtpSecurity === 'none',
    auth: settings.smtpUser ? { user: settings.smtpUser, pass: settings.password ?? '' } : undefined,
    connectionTimeout: options.timeoutMs,
    greetingTimeout: options.timeoutMs,
    socketTimeout: options.timeoutMs,
    dnsTimeout: options.timeoutMs,
  });
  const from = { name: settings.fromName, address: settings.fromAddress };
  return {
    async send(message) {
      try {
        const info = await transporter.sendMail({ from, ...message });
        return { ok: true, messageId: info.messageId, response: info.response };
      } catch (err) {
        const e = err as { responseCode?: number; command?: string; response?: string; message?: string };
        const code = typeof e.responseCode === 'number' ? e.responseCode : null;
        const permanent = code !== null && code >= 500;
        return { ok: false, permanent, recipient: permanent && e.command === 'RCPT TO', code, response: (e.response ?? e.message ?? String(err)).slice(0, 1000) };
      }
    },
    close: () => transporter.close(),
  };
}
