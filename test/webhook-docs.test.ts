import { type ChildProcess, spawn } from 'node:child_process';
import { createHmac } from 'node:crypto';
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Webhook } from 'standardwebhooks';
import { afterAll, describe, expect, it } from 'vitest';
import { signatureHeader, signedHeaders } from '../src/webhooks/signing.js';

// docs/webhooks.md is what receiver authors copy: its test vector and its receiver must be right.
const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const doc = readFileSync(path.join(ROOT, 'docs/webhooks.md'), 'utf8');

function vector() {
  const block = /### Test vector[\s\S]*?```text\n([\s\S]*?)```/.exec(doc)![1]!;
  const field = (name: string) => new RegExp(`^${name}:\\s+(.+)$`, 'm').exec(block)![1]!.trim();
  return { secret: field('secret'), id: field('id'), timestamp: Number(field('timestamp')), body: field('body'), signature: field('signature') };
}

const children: ChildProcess[] = [];
afterAll(() => children.forEach((c) => c.kill('SIGKILL')));

describe('docs/webhooks.md', () => {
  it('its test vector is what we send, what standardwebhooks { format: "raw" } and a plain HMAC compute', () => {
    const v = vector();
    expect(v.secret).toMatch(/^[0-9a-f]{64}$/);
    const at = new Date(v.timestamp * 1000);
    expect(signatureHeader([v.secret], v.id, at, v.body)).toBe(v.signature);
    expect(signedHeaders([v.secret], v.id, new Date(v.timestamp * 1000 + 999), v.body)).toEqual({
      'webhook-id': v.id,
      'webhook-timestamp': String(v.timestamp),
      'webhook-signature': v.signature,
    });
    expect(new Webhook(v.secret, { format: 'raw' }).sign(v.id, at, v.body)).toBe(v.signature);
    const hmac = createHmac('sha256', Buffer.from(v.secret, 'utf8')).update(`${v.id}.${v.timestamp}.${v.body}`).digest('base64');
    expect(`v1,${hmac}`).toBe(v.signature);
    // The documented mistake really does not match, and the doc shows what it gives instead.
    const wrong = new Webhook(v.secret).sign(v.id, at, v.body);
    expect(wrong).not.toBe(v.signature);
    expect(doc).toContain(wrong);
    // The body is the envelope, minified.
    expect(JSON.stringify(JSON.parse(v.body))).toBe(v.body);
    expect(Object.keys(JSON.parse(v.body))).toEqual(['id', 'type', 'timestamp', 'shopId', 'data']);
  });

  it('its receiver runs as written: accepts our signed delivery once, acknowledges a duplicate, refuses a forgery', async () => {
    const code = /```js\n(\/\/ receiver\.mjs[\s\S]*?)```/.exec(doc)![1]!;
    const secret = vector().secret;
    const probe = net.createServer().listen(0, '127.0.0.1');
    await once(probe, 'listening');
    const port = (probe.address() as net.AddressInfo).port;
    probe.close();
    const child = spawn(process.execPath, ['--input-type=module', '-e', code], {
      cwd: ROOT,
      env: { ...process.env, LOYALTY_WEBHOOK_SECRET: secret, PORT: String(port) },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    children.push(child);
    let stdout = '';
    child.stdout!.on('data', (c: Buffer) => (stdout += c.toString()));
    const body = JSON.stringify({ id: 'evt_docsreceiver', type: 'points/added', timestamp: new Date().toISOString(), shopId: 's', data: { newPoints: 1 } });
    const headers = { 'content-type': 'application/json', ...signedHeaders(['0'.repeat(64), secret], 'evt_docsreceiver', new Date(), body) };
    const post = async (payload: string, h: Record<string, string> = headers) => {
      for (let i = 0; ; i++) {
        try {
          return (await fetch(`http://127.0.0.1:${port}/`, { method: 'POST', headers: h, body: payload })).status;
        } catch (err) {
          if (i > 100) throw err;
          await new Promise((r) => setTimeout(r, 100)); // still starting
        }
      }
    };
    expect(await post(body)).toBe(204);
    expect(await post(body)).toBe(204);
    expect(await post(body.replace('"newPoints":1', '"newPoints":2'))).toBe(400);
    expect(await post(body, { ...headers, 'webhook-signature': signatureHeader(['1'.repeat(64)], 'evt_docsreceiver', new Date(), body) })).toBe(400);
    expect(stdout.trim().split('\n')).toEqual(['points/added evt_docsreceiver']);
  });
});
