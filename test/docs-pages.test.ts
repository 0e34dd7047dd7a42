import { existsSync } from 'node:fs';
import { buildSchema, parse, validate } from 'graphql';
import { readFileSync } from 'node:fs';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EXAMPLE_OPERATIONS } from '../src/graphql/yoga.js';
import { type BrowserSession, openChromium } from './chromium.js';
import { startTestApp, type TestApp } from './helpers.js';

let t: TestApp;
let shop: { shopId: string; apiKey: string };
let chromium: BrowserSession;
let page: Page;

beforeAll(async () => {
  t = await startTestApp();
  shop = await t.shop('Docs shop');
  // The customer GraphiQL's example operations name.
  await t.customer(shop.shopId, 'demo-1001', 250);
  chromium = await openChromium(t.url);
  page = chromium.page;
});

afterAll(async () => {
  await chromium?.close();
  await t?.stop();
});

describe('GET /docs: the REST reference in a real Chromium', () => {
  it('renders every operation of /openapi.json, with links to GraphiQL and the dashboard', async () => {
    const document = await (await fetch(`${t.url}/openapi.json`)).json();
    const operations = Object.values(document.paths as Record<string, object>).flatMap((item) => Object.keys(item));
    await page.goto(`${t.url}/docs`);
    await page.waitForSelector('.opblock-summary-path[data-path="/rest-api/v1/points/add"]');
    expect(await page.locator('.opblock-summary-path[data-path^="/rest-api/v1/"]').count()).toBe(operations.length);
    // The topics' deliveries (the document's `webhooks`) are listed too.
    expect(await page.locator('.opblock').count()).toBe(operations.length + Object.keys(document.webhooks).length);
    expect(await page.locator('.opblock-post .opblock-summary-path[data-path="/rest-api/v1/points/substract"]').count()).toBe(1);
    expect(await page.locator('.info .title').first().textContent()).toContain(document.info.title);
    expect(await page.locator('nav a[href="/graphql"]').count()).toBe(1);
    expect(await page.locator('nav a[href="/dashboard"]').count()).toBe(1);
    expect(existsSync(await chromium.screenshot('docs.png'))).toBe(true);
  });

  it('calls the API from "Try it out" with the key given to "Authorize"', async () => {
    await page.click('button.authorize');
    await page.fill('.modal-ux input[type="text"], .modal-ux input[type="password"]', shop.apiKey);
    await page.click('.modal-ux button.authorize');
    await page.click('.modal-ux button.close-modal');
    const operation = page.locator('#operations-Webhooks-webhookTopics');
    await operation.locator('.opblock-summary').click();
    await operation.locator('button.try-out__btn').click();
    await operation.locator('button.execute').click();
    const status = operation.locator('.live-responses-table tbody .response-col_status').first();
    await status.waitFor();
    expect((await status.textContent())?.trim()).toBe('200');
    expect(await operation.locator('.live-responses-table .microlight').first().textContent()).toContain('points/added');
  });

  it('is served with a CSP that keeps the page on this origin, and loaded nothing from elsewhere', async () => {
    const res = await fetch(`${t.url}/docs`);
    expect(res.headers.get('content-security-policy')).toContain("script-src 'self'");
    expect(res.headers.get('content-security-policy')).toContain("connect-src 'self'");
    expect(chromium.foreignRequests).toEqual([]);
    expect(chromium.problems).toEqual([]);
  });
});

describe('GET /graphql: GraphiQL in a real Chromium', () => {
  it('preloads example operations that are valid against the schema', () => {
    const schema = buildSchema(readFileSync('schema.graphql', 'utf8'));
    const operations = parse(EXAMPLE_OPERATIONS).definitions.map((d) => ('operation' in d ? `${d.operation} ${d.name?.value}` : d.kind));
    expect(operations).toEqual(expect.arrayContaining(['query Customer', 'query RedeemableRewards', 'mutation Redeem', expect.stringMatching(/^subscription /)]));
    expect(validate(schema, parse(EXAMPLE_OPERATIONS))).toEqual([]);
    expect(EXAMPLE_OPERATIONS).toContain('/docs');
    expect(EXAMPLE_OPERATIONS).toContain('/dashboard');
  });

  it('renders its editor and runs the example customer query with an API key header', async () => {
    await page.goto(`${t.url}/graphql`);
    const queryEditor = page.locator('.graphiql-query-editor');
    await queryEditor.getByText('query Customer').waitFor();
    // The headers editor: the key goes in as JSON (inserted, so the editor adds no closing quotes).
    await page.getByRole('button', { name: /headers/i }).first().click();
    await page.locator('.graphiql-editor-tool .monaco-editor, .graphiql-editor-tool .CodeMirror').last().click();
    await page.keyboard.press('ControlOrMeta+A');
    await page.keyboard.insertText(JSON.stringify({ Authorization: `Bearer ${shop.apiKey}` }));
    // Ctrl+Enter runs the operation under the cursor.
    await queryEditor.getByText('query Customer').click();
    await page.keyboard.press('ControlOrMeta+Enter');
    const response = page.locator('.graphiql-response');
    await response.getByText('demo-1001@example.com').waitFor({ timeout: 20_000 });
    const text = (await response.textContent())!.replace(/\s+/g, ' ');
    expect(text).toMatch(/"points": ?250/);
    expect(existsSync(await chromium.screenshot('graphiql.png'))).toBe(true);
  });

  it('loaded nothing from another origin', () => {
    expect(chromium.foreignRequests).toEqual([]);
    // Its schema fetch before the key was entered is refused with 401, which the browser logs.
    expect(chromium.problems.filter((p) => !p.includes('status of 401'))).toEqual([]);
  });
});

describe('GET /dashboard', () => {
  it('links to the REST reference and GraphiQL', async () => {
    await page.goto(`${t.url}/dashboard`);
    await page.click('a[href="/docs"]');
    await page.waitForSelector('.opblock');
    expect(page.url()).toBe(`${t.url}/docs`);
    await page.goto(`${t.url}/dashboard`);
    expect(await page.locator('a[href="/graphql"]').count()).toBe(1);
    expect(chromium.foreignRequests).toEqual([]);
  });
});
