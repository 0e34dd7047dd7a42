import type { DB } from '../db/database.js';
import type { SecretBox } from '../domain/kernel/index.js';
import {
  claimMail, type ClaimedMail, composeMail, createMailTransport, type MailTransport, type OpenMailSettings, openMailSettings, queueMail, recordMailFailed,
  recordMailsSent, recordMailSkipped, recordRecipientRefused, returnMail, type SentMail, shopsWithDueMail, unsubscribeUrl,
} from '../domain/mail/index.js';
import type { OutboxHandler } from '../events/outbox-relay.js';
import { batched } from '../events/batched.js';
import { shopLanes } from '../events/shop-lanes.js';
import type { Logger } from '../logger.js';

/**
 * Sends the mail queue (src/domain/mail/queue.ts) through each shop's SMTP server, the way the
 * Shopify sync worker serves its jobs: one lane per shop with mail due, each with a few sends in
 * flight over a pooled connection, every wait bounded by the transport's time-out. A shop whose
 * server hangs holds its own lane and nothing else; lanes are capped per worker and the shops
 * waiting longest get free ones first. Any number of workers share the queue through leases.
 */

export type MailWorkerOptions = {
  db: DB;
  logger: Logger;
  secrets: SecretBox;
  /** The HMAC key of unsubscribe tokens. */
  tokenKey: Buffer;
  /** The service's public URL (PUBLIC_URL), which unsubscribe links point to. */
  publicUrl: string;
  /** How long any one wait on an SMTP server may take (connecting, its greeting, each answer). */
  timeoutMs?: number;
  now?: () => number;
  /** Shops served at once by this worker. */
  lanes?: number;
  /** Sends in flight per shop (and connections in its pool). */
  perShop?: number;
  pollMs?: number;
  onSend?: (outcome: 'sent' | 'retry' | 'failed' | 'suppressed' | 'skipped') => void;
};

export type MailWorker = {
  outboxHandler: OutboxHandler;
  start(): void;
  stop(): Promise<void>;
  wake(): void;
};

export function createMailWorker(options: MailWorkerOptions): MailWorker {
  const { db, logger, secrets, tokenKey, publicUrl } = options;
  const now = options.now ?? Date.now;
  const maxLanes = options.lanes ?? 16;
  const perShop = options.perShop ?? 8;
  const pollMs = options.pollMs ?? 500;
  const timeoutMs = options.timeoutMs ?? 10_000;
  // A send waits at most for connecting, the greeting, and the answers to the envelope and the
  // data (each bounded by the time-out); the lease outlasts all of that with room for the record.
  const leaseMs = 6 * timeoutMs + 5_000;
  // One pooled transport per shop, replaced when its settings change.
  const transports = new Map<string, { updatedAt: number; transport: MailTransport }>();
  // Sends that finish together are recorded in one statement: a round trip per batch, not per e-mail.
  const recordSent = batched<SentMail>((items) => recordMailsSent(db, items));
  function transportFor(settings: OpenMailSettings): MailTransport {
    const at = settings.updatedAt?.getTime() ?? 0;
    const held = transports.get(settings.shopId);
    if (held?.updatedAt === at) return held.transport;
    held?.transport.close();
    const transport = createMailTransport(settings, { timeoutMs, maxConnections: perShop });
    transports.set(settings.shopId, { updatedAt: at, transport });
    return transport;
  }

  async function send(settings: OpenMailSettings, claimed: ClaimedMail): Promise<void> {
    const at = () => new Date(now());
    const skip = async (reason: string) => {
      await recordMailSkipped(db, claimed, reason, at());
      options.onSend?.('skipped');
    };
    if (!settings.enabled || !settings.kinds.includes(claimed.kind)) return skip('the shop does not send this e-mail');
    if (claimed.unsubscribed) return skip('the customer unsubscribed');
    if (claimed.kinds_off.includes(claimed.kind)) return skip('the customer opted out of this e-mail');
    if (claimed.suppressed) return skip('the address is suppressed: the server refused it for good');
    const message = await composeMail(settings, claimed, unsubscribeUrl(publicUrl, tokenKey, claimed.shop_id, claimed.customer_id));
    const outcome = await transportFor(settings).send(message);
    if (outcome.ok) {
      await recordSent({ claimed, to: message.to, messageId: outcome.messageId, at: at() });
      options.onSend?.('sent');
    } else if (outcome.recipient) {
      await recordRecipientRefused(db, claimed, message.to, outcome.response, at());
      options.onSend?.('suppressed');
    } else {
      const final = await recordMailFailed(db, claimed, outcome.response, at(), outcome.permanent);
      options.onSend?.(final ? 'failed' : 'retry');
    }
  }

  /** Serves one shop until it has nothing due: `perShop` slots take its claimed messages in the order they were queued. */
  async function lane(shopId: string): Promise<void> {
    const settings = await openMailSettings(db, secrets, shopId);
    const claimed: ClaimedMail[] = [];
    let claiming: Promise<boolean> | undefined;
    const claimMore = () =>
      (claiming ??= claimMail(db, shopId, new Date(now()), perShop * 4, leaseMs)
        .then((more) => {
          claimed.push(...more);
          return more.length > 0;
        })
        .finally(() => {
          claiming = undefined;
        }));
    const slot = async () => {
      while (lanes.running) {
        let next = claimed.shift();
        if (!next) {
          if (!(await claimMore())) return;
          next = claimed.shift();
          if (!next) continue;
        }
        if (!settings) {
          await recordMailSkipped(db, next, 'the shop has no mail settings', new Date(now()));
          continue;
        }
        try {
          await send(settings, next);
        } catch (err) {
          // Rendering or recording failed (a bug, the database): the lease ends and it is tried again.
          logger.error({ err, shopId, messageId: next.id }, 'an e-mail could not be sent or recorded');
        }
      }
    };
    await Promise.allSettled(Array.from({ length: perShop }, slot));
    await claiming?.catch(() => undefined);
    // Stopping: messages claimed but not begun are due again now, for whichever worker runs next.
    for (const message of claimed.splice(0)) await returnMail(db, message, new Date(now()));
  }

  const lanes = shopLanes({
    name: 'mail',
    logger,
    maxLanes,
    pollMs,
    dueShops: (busy, free) => shopsWithDueMail(db, new Date(now()), busy, free),
    lane,
  });

  return {
    outboxHandler: { name: 'mail', inTransaction: (trx, events) => queueMail(trx, events, new Date(now())), afterCommit: () => lanes.wake() },
    start: () => lanes.start(),
    async stop() {
      await lanes.stop();
      for (const { transport } of transports.values()) transport.close();
      transports.clear();
    },
    wake: () => lanes.wake(),
  };
}
