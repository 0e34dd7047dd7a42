import { existsSync, readFileSync } from 'node:fs';
import { buildSchema, parse, validate } from 'graphql';
import type { Page } from 'playwright-core';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { EXAMPLE_OPERATIONS } from '../src/http/graphiql.js';
import { type BrowserSession, openChromium } from './chromium.js';
import { type NpmServer, startNpm } from './npm-start.js';

// GraphiQL and the REST reference as a newcomer meets them: `npm start` in a fresh folder, the
// demo shop's printed key, a real Chromium. Any console error or uncaught exception fails the test
// it happened in (the ones a test causes on purpose, it checks and takes away itself).

let server: NpmServer;
let chromium: BrowserSession;
let page: Page;

beforeAll(async () => {
  server = await startNpm();
  // The customer GraphiQL's example operations name: the demo shop's, made here on PostgreSQL.
  if (!server.demo) {
    const upsert = await server.graphql('mutation { customerUpsert(input: { shopifyCustomerId: "demo-1001", email: "ada@example.com" }) { userErrors { code } } }');
    expect(upsert.data.customerUpsert.userErrors).toEqual([]);
    expect((await server.request('POST', '/rest-api/v1/points/add', { customerIdentifier: 'demo-1001', amount: 250 })).status).toBe(200);
  }
  chromium = await openChromium(server.url);
  page = chromium.page;
}, 300_000);

afterEach(() => chromium.expectClean());

afterAll(async () => {
  await chromium?.close();
  await server?.stop();
});

describe('GET /graphql: GraphiQL in a real Chromium, served by npm start', () => {
  it('preloads example operations that are valid against the schema', () => {
    const schema = buildSchema(readFileSync('schema.graphql', 'utf8'));
    const operations = parse(EXAMPLE_OPERATIONS).definitions.map((d) => ('operation' in d ? `${d.operation} ${d.name?.value}` : d.kind));
    expect(operations).toEqual(expect.arrayContaining(['query Customer', 'query RedeemableRewards', 'mutation Redeem', expect.stringMatching(/^subscription /)]));
    expect(validate(schema, parse(EXAMPLE_OPERATIONS))).toEqual([]);
    expect(EXAMPLE_OPERATIONS).toContain('/docs');
    expect(EXAMPLE_OPERATIONS).toContain('/dashboard');
  });

  it('is a page whose every script is a file of this server, held to that by its CSP, and that no other site may frame', async () => {
    const res = await fetch(`${server.url}/graphql`, { headers: { accept: 'text/html' } });
    expect(res.status).toBe(200);
    const csp = res.headers.get('content-security-policy')!;
    expect(csp).toContain("script-src 'self';");
    expect(csp).toContain("worker-src 'self';");
    expect(csp).toContain("connect-src 'self';");
    expect(csp).toContain("frame-ancestors 'none'");
    expect(res.headers.get('x-frame-options')).toBe('DENY');
    const html = await res.text();
    // Scripts with a src only; the one without is data (the example operations), which no browser runs.
    const scripts = [...html.matchAll(/<script([^>]*)>/g)].map((m) => m[1]!);
    expect(scripts.filter((attrs) => !/\bsrc=/.test(attrs))).toEqual([' type="application/json" id="graphiql-options"']);
    for (const src of scripts.flatMap((attrs) => /src="([^"]+)"/.exec(attrs)?.[1] ?? [])) {
      const script = await fetch(`${server.url}${src}`);
      expect(script.status, src).toBe(200);
      expect(script.headers.get('content-type'), src).toContain('text/javascript');
    }
  });

  it('sends GraphiQL\'s 9 MB bundle once: a browser that has it revalidates by its ETag and gets a 304', async () => {
    const first = await fetch(`${server.url}/graphiql/graphiql.js`);
    expect(first.status).toBe(200);
    expect(first.headers.get('cache-control')).toBe('no-cache');
    const etag = first.headers.get('etag')!;
    expect(etag).toMatch(/^"[\w-]+"$/);
    expect((await first.arrayBuffer()).byteLength).toBeGreaterThan(1_000_000);
    const again = await fetch(`${server.url}/graphiql/graphiql.js`, { headers: { 'if-none-match': etag } });
    expect(again.status).toBe(304);
    expect((await again.arrayBuffer()).byteLength).toBe(0);
    expect(again.headers.get('content-security-policy')).toContain("frame-ancestors 'none'");
    const stale = await fetch(`${server.url}/graphiql/graphiql.js`, { headers: { 'if-none-match': '"another"' } });
    expect(stale.status).toBe(200);
    await stale.arrayBuffer();
  });

  it('asks for the API key first, loads the schema with it once, runs the example query and keeps its tabs on reload', async () => {
    // Every POST the page sends to /graphql, with its answer's status.
    const posts: Array<{ body: string; status: number }> = [];
    const workers: string[] = [];
    page.on('worker', (worker) => workers.push(new URL(worker.url()).pathname));
    page.on('response', (res) => {
      const req = res.request();
      if (req.method() === 'POST' && new URL(req.url()).pathname === '/graphql') posts.push({ body: req.postData() ?? '', status: res.status() });
    });
    await page.goto(`${server.url}/graphql`);
    const form = page.locator('#api-key-form');
    await form.waitFor();
    // Nothing was asked of the server before the key: no 401, no "Error fetching schema".
    expect(posts).toEqual([]);
    await page.locator('#api-key').fill('lk_not_a_key');
    await page.getByRole('button', { name: 'Open GraphiQL' }).click();
    await page.getByRole('alert').getByText(/not valid/).waitFor();
    // The browser logs the refused key's 401.
    chromium.expectProblems(/status of 401/);

    await page.locator('#api-key').fill(server.apiKey);
    await page.getByRole('button', { name: 'Open GraphiQL' }).click();
    const queryEditor = page.locator('.graphiql-query-editor');
    await queryEditor.getByText('query Customer').waitFor({ timeout: 30_000 });
    // The schema loads with the key, without a manual re-fetch: the editor knows the fields.
    await expect.poll(() => posts.filter((p) => p.body.includes('__schema')).map((p) => p.status), { timeout: 20_000 }).toEqual([200]);
    expect(await page.getByText('Error fetching schema').count()).toBe(0);
    // Ctrl+Enter runs the operation under the cursor; no header to type.
    await queryEditor.getByText('query Customer').click();
    await page.keyboard.press('ControlOrMeta+Enter');
    const response = page.locator('.graphiql-response');
    await response.getByText('ada@example.com').waitFor({ timeout: 20_000 });
    const text = (await response.textContent())!.replace(/\s+/g, ' ');
    expect(text).toMatch(/"points": ?250/);
    expect(existsSync(await chromium.screenshot('graphiql.png'))).toBe(true);

    // A reload keeps the key (this tab) and the tabs: no form, no new empty tab, the schema fetched with the key.
    const tabs = await page.locator('.graphiql-tab').count();
    posts.length = 0;
    await page.reload();
    await queryEditor.getByText('query Customer').waitFor({ timeout: 30_000 });
    expect(await form.isHidden()).toBe(true);
    await expect.poll(() => posts.filter((p) => p.body.includes('__schema')).map((p) => p.status), { timeout: 20_000 }).toEqual([200]);
    expect(await page.locator('.graphiql-tab').count()).toBe(tabs);
    expect(posts.every((p) => p.status === 200)).toBe(true);
    // Monaco's language services ran in their workers, files of this server.
    expect(workers).toEqual(expect.arrayContaining(['/graphiql/graphql.worker.js']));
  });
});

describe('GET /docs: the REST reference in a real Chromium, served by npm start', () => {
  it('renders every operation of /openapi.json, with links to GraphiQL and the dashboard', async () => {
    const document = await (await fetch(`${server.url}/openapi.json`)).json();
    const operations = Object.values(document.paths as Record<string, object>).flatMap((item) => Object.keys(item));
    await page.goto(`${server.url}/docs`);
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
    await page.fill('.modal-ux input[type="text"], .modal-ux input[type="password"]', server.apiKey);
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

  it('is served with a CSP that keeps the page on this origin', async () => {
    const res = await fetch(`${server.url}/docs`);
    expect(res.headers.get('content-security-policy')).toContain("script-src 'self';");
    expect(res.headers.get('content-security-policy')).toContain("connect-src 'self';");
  });
});

describe('every page refuses to be framed by another site', () => {
  it('/graphql, /docs and /dashboard in an iframe of another origin stay empty', async () => {
    const framer = await chromium.browser.newPage();
    const refusals: string[] = [];
    framer.on('console', (msg) => {
      if (msg.type() === 'error') refusals.push(msg.text());
    });
    try {
      for (const [i, path] of ['/graphql', '/docs', '/dashboard'].entries()) {
        await framer.setContent(`<iframe src="${server.url}${path}"></iframe>`);
        const frame = framer.frames()[1]!;
        // Chromium shows its error page in the frame instead, and says why.
        await expect.poll(() => refusals.length).toBe(i + 1);
        expect(refusals[i]).toContain(`Framing '${server.url}/' violates the following Content Security Policy directive: "frame-ancestors 'none'"`);
        expect(frame.url()).toBe('chrome-error://chromewebdata/');
        expect(await frame.locator('#api-key-form, #swagger-ui, #program').count()).toBe(0);
      }
    } finally {
      await framer.close();
    }
  });
});
