import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { startTestApp, type TestApp } from './helpers.js';

// The served /openapi.json under Redocly's recommended rules (@redocly/cli runs offline; its
// telemetry and update check are switched off).

const REDOCLY = path.resolve(import.meta.dirname, '../node_modules/.bin/redocly');
/** The project has not chosen a licence; nothing else may be left. */
const WAIVED = new Set(['info-license']);

let t: TestApp;
let dir: string;
beforeAll(async () => {
  t = await startTestApp();
  dir = await mkdtemp(path.join(tmpdir(), 'loyalty-openapi-'));
}, 180_000);
afterAll(async () => {
  await t?.stop();
  if (dir) await rm(dir, { recursive: true, force: true });
});

it('passes `redocly lint` with the recommended rules', { timeout: 120_000 }, async () => {
  const doc = (await (await fetch(`${t.url}/openapi.json`)).json()) as any;
  // Generated clients need an absolute server; this one defaults to the server that served it.
  expect(doc.servers).toEqual([{ url: '{origin}', description: expect.any(String), variables: { origin: { default: t.url, description: expect.any(String) } } }]);
  const webhookIds = Object.values(doc.webhooks).map((w: any) => w.post.operationId);
  expect(webhookIds).toContain('pointsAddedWebhook');
  expect(new Set(webhookIds).size).toBe(webhookIds.length);

  const file = path.join(dir, 'openapi.json');
  await writeFile(file, JSON.stringify(doc, null, 2));
  const { stdout } = await promisify(execFile)(REDOCLY, ['lint', '--extends', 'recommended', '--format', 'json', file], {
    cwd: dir,
    env: { ...process.env, REDOCLY_TELEMETRY: 'off', REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true', NO_COLOR: '1' },
  });
  const report = JSON.parse(stdout) as { totals: { errors: number }; problems: Array<{ ruleId: string; severity: string; message: string }> };
  expect(report.totals.errors).toBe(0);
  expect(report.problems.filter((p) => !WAIVED.has(p.ruleId))).toEqual([]);
});
