import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { validSigningSecrets } from '../src/domain/webhooks/webhook-subscriptions.js';
import { createSecretBox } from '../src/webhooks/secret-box.js';
import { startTestApp, type TestApp } from './helpers.js';

// Errors a newcomer meets first must name what to change, not an internal detail.

const SECRETS_KEY = randomBytes(32).toString('hex');
let t: TestApp;
let shop: { shopId: string; apiKey: string };

beforeAll(async () => {
  t = await startTestApp({ SECRETS_KEY, WEBHOOK_ALLOWED_HOSTS: '127.0.0.1' });
  shop = await t.shop();
}, 60_000);
afterAll(() => t?.stop());

const get = async (path: string) => {
  const res = await fetch(`${t.url}/rest-api/v1${path}`, { headers: { authorization: `Bearer ${shop.apiKey}` } });
  return { status: res.status, body: (await res.json()) as any };
};

describe('a missing query parameter is "required"', () => {
  it.each([
    ['/pointsRedemptions?customerIdentifier=x&pageSize=5', 'page'],
    ['/pointsRedemptions?customerIdentifier=x&page=1', 'pageSize'],
    ['/referral/referee?page=1&pageSize=5', 'customerIdentifier'],
  ])('GET %s', async (path, missing) => {
    const { status, body } = await get(path);
    expect(status).toBe(400);
    expect(body).toMatchObject({ success: false, error: 'validation_error', message: `${missing}: required` });
    expect(body.details).toContainEqual({ path: missing, message: 'required' });
  });

  it('says what is wrong with a value that is there', async () => {
    const { body } = await get('/pointsRedemptions?customerIdentifier=x&page=0&pageSize=5');
    expect(body.message).toMatch(/^page: .*>=1/);
  });

  it('a missing body field is "required" too', async () => {
    const res = await t.post('/rest-api/v1/points/add', { customerIdentifier: 'x' }, shop.apiKey);
    expect(res.status).toBe(400);
    expect(((await res.json()) as any).message).toBe('amount: required');
  });
});

describe('a SECRETS_KEY that differs from the one that sealed a secret', () => {
  it('is named in the error, with what to do', async () => {
    const res = await t.post('/rest-api/v1/webhooks/subscriptions', { topic: 'points/added', callbackUrl: 'https://127.0.0.1:9/hook' }, shop.apiKey);
    expect(res.status).toBe(201);
    const { subscription } = (await res.json()) as any;
    const same = { db: t.app.database.db, secrets: createSecretBox(Buffer.from(SECRETS_KEY, 'hex')) };
    expect(await validSigningSecrets(same, subscription.id)).toEqual([subscription.signingSecret]);

    const other = { db: t.app.database.db, secrets: createSecretBox(randomBytes(32)) };
    const err = await validSigningSecrets(other, subscription.id).catch((e: Error) => e);
    expect(err).toBeInstanceOf(Error);
    expect((err as Error).message).toContain(`webhook subscription ${subscription.id}`);
    expect((err as Error).message).toContain('SECRETS_KEY');
    expect((err as Error).message).toContain('secrets.key in DATA_DIR');
    expect((err as Error).message).not.toContain('Unsupported state');
  });
});
