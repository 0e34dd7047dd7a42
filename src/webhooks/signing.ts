import { Webhook } from 'standardwebhooks';

/**
 * Standard Webhooks signatures (DESIGN.md "Webhooks"). The HMAC-SHA256 key is the UTF-8 bytes of
 * the 64-hex secret, hence `format: 'raw'`: without it the library would base64-decode the secret.
 */
export function signatureHeader(secrets: readonly string[], webhookId: string, timestamp: Date, body: string): string {
  // One `v1,<base64>` per valid secret, in the order given (newest first), space-separated.
  return secrets.map((secret) => new Webhook(secret, { format: 'raw' }).sign(webhookId, timestamp, body)).join(' ');
}

export type SignedHeaders = {
  'webhook-id': string;
  'webhook-timestamp': string;
  'webhook-signature': string;
};

/** The three Standard Webhooks headers of one attempt made at `at`. */
export function signedHeaders(secrets: readonly string[], webhookId: string, at: Date, body: string): SignedHeaders {
  // The signature covers whole seconds, as the header carries them.
  const timestamp = new Date(Math.floor(at.getTime() / 1000) * 1000);
  return {
    'webhook-id': webhookId,
    'webhook-timestamp': String(timestamp.getTime() / 1000),
    'webhook-signature': signatureHeader(secrets, webhookId, timestamp, body),
  };
}
