import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { SecretBox } from '../domain/kernel/index.js';

/**
 * Webhook signing secrets are encrypted at rest (AES-256-GCM) so that a database dump or backup
 * alone does not let anyone forge our webhooks: the key lives outside the database (SECRETS_KEY,
 * or a key file in DATA_DIR). Unlike API keys they cannot be hashed: we need them to sign.
 */
const VERSION = 'v1';
const IV_BYTES = 12;
const TAG_BYTES = 16;

export function createSecretBox(key: Buffer): SecretBox {
  if (key.length !== 32) throw new Error('the secrets key must be 32 bytes');
  return {
    seal(plaintext, context) {
      const iv = randomBytes(IV_BYTES);
      const cipher = createCipheriv('aes-256-gcm', key, iv).setAAD(Buffer.from(context));
      const ciphertext = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
      return `${VERSION}:${Buffer.concat([iv, cipher.getAuthTag(), ciphertext]).toString('base64url')}`;
    },
    open(sealed, context) {
      const [version, payload] = sealed.split(':');
      if (version !== VERSION || !payload) throw new Error('not a sealed secret');
      const bytes = Buffer.from(payload, 'base64url');
      const decipher = createDecipheriv('aes-256-gcm', key, bytes.subarray(0, IV_BYTES))
        .setAAD(Buffer.from(context))
        .setAuthTag(bytes.subarray(IV_BYTES, IV_BYTES + TAG_BYTES));
      try {
        return Buffer.concat([decipher.update(bytes.subarray(IV_BYTES + TAG_BYTES)), decipher.final()]).toString('utf8');
      } catch {
        // GCM says only "Unsupported state or unable to authenticate data"; the usual cause is a
        // key that differs from the one that sealed the secret, so name the setting.
        throw new Error(
          `cannot decrypt the signing secret of webhook subscription ${context}: it was sealed with another key. Give this instance the ` +
            'SECRETS_KEY the other instances use (without SECRETS_KEY, the key is the file secrets.key in DATA_DIR); ' +
            "if that key is lost, rotate the subscription's secret",
        );
      }
    },
  };
}

export type SecretsKeySource = 'env' | 'file' | 'ephemeral';

/**
 * The key: SECRETS_KEY (64 hex characters) when set; otherwise `secrets.key` in the data folder,
 * created on first start; with an in-memory data folder (`memory://`, tests) a key for this
 * process only, since nothing it encrypts outlives the process anyway.
 */
export function loadSecretsKey(options: { secretsKey?: string | undefined; dataDir: string }): { key: Buffer; source: SecretsKeySource } {
  if (options.secretsKey) return { key: Buffer.from(options.secretsKey, 'hex'), source: 'env' };
  if (options.dataDir.startsWith('memory://')) return { key: randomBytes(32), source: 'ephemeral' };
  const file = path.join(options.dataDir, 'secrets.key');
  mkdirSync(options.dataDir, { recursive: true });
  try {
    writeFileSync(file, `${randomBytes(32).toString('hex')}\n`, { flag: 'wx', mode: 0o600 });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
  }
  const hex = readFileSync(file, 'utf8').trim();
  if (!/^[0-9a-f]{64}$/i.test(hex)) throw new Error(`${path.resolve(file)} does not hold a 64-hex-character key`);
  return { key: Buffer.from(hex, 'hex'), source: 'file' };
}
