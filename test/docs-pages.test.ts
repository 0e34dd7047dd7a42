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
    // The REST API's operations and the Shopify connector's endpoint.
    expect(await page.locator('.opblock-summary-path[data-path^="/rest-api/v1/"]').count()).toBe(operations.length - 1);
    expect(await page.locator('.opblock-summary-path[data-path="/integrations/shopify/webhooks"]').count()).toBe(1);
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

  it('asks for the API key first, loads the schema with it once, runs the example query and keeps its tabs on reload', async () => {
    // Every POST the page sends to /graphql, with its answer's status.
    const posts: Array<{ body: string; status: number }> = [];
    page.on('response', (res) => {
      const req = res.request();
      if (req.method() === 'POST' && new URL(req.url()).pathname === '/graphql') posts.push({ body: req.postData() ?? '', status: res.status() });
    });
    await page.goto(`${t.url}/graphql`);
    const form = page.locator('#api-key-form');
    await form.waitFor();
    // Nothing was asked of the server before the key: no 401, no "Error fetching schema".
    expect(posts).toEqual([]);
    await page.locator('#api-key').fill('lk_not_a_key');
    await page.getByRole('button', { name: 'Open GraphiQL' }).click();
    await page.getByRole('alert').getByText(/not valid/).waitFor();

    await page.locator('#api-key').fill(shop.apiKey);
    await page.getByRole('button', { name: 'Open GraphiQL' }).click();
    const queryEditor = page.locator('.graphiql-query-editor');
    await queryEditor.getByText('query Customer').waitFor();
    // The schema loads with the key, without a manual re-fetch: the editor knows the fields.
    await expect.poll(() => posts.filter((p) => p.body.includes('__schema')).map((p) => p.status), { timeout: 20_000 }).toEqual([200]);
    expect(await page.getByText('Error fetching schema').count()).toBe(0);
    // Ctrl+Enter runs the operation under the cursor; no header to type.
    await queryEditor.getByText('query Customer').click();
    await page.keyboard.press('ControlOrMeta+Enter');
    const response = page.locator('.graphiql-response');
    await response.getByText('demo-1001@example.com').waitFor({ timeout: 20_000 });
    const text = (await response.textContent())!.replace(/\s+/g, ' ');
    expect(text).toMatch(/"points": ?250/);
    expect(existsSync(await chromium.screenshot('graphiql.png'))).toBe(true);

    // A reload keeps the key (this tab) and the tabs: no form, no new empty tab, the schema fetched with the key.
    const tabs = await page.locator('.graphiql-tab').count();
    posts.length = 0;
    await page.reload();
    await queryEditor.getByText('query Customer').waitFor();
    expect(await form.count()).toBe(0);
    await expect.poll(() => posts.filter((p) => p.body.includes('__schema')).map((p) => p.status), { timeout: 20_000 }).toEqual([200]);
    expect(await page.locator('.graphiql-tab').count()).toBe(tabs);
    expect(posts.every((p) => p.status === 200)).toBe(true);
  });

  it('loaded nothing from another origin', () => {
    expect(chromium.foreignRequests).toEqual([]);
    // The one 401 is the wrong key the test typed into the form, which the browser logs.
    expect(chromium.problems.filter((p) => !p.includes('status of 401'))).toEqual([]);
    expect(chromium.problems.filter((p) => p.includes('status of 401')).length).toBeLessThanOrEqual(1);
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
