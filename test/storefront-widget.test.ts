import { readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type BrowserSession, openChromium } from './chromium.js';
import { startTestApp, type TestApp } from './helpers.js';
import { until } from './live-helpers.js';

const WIDGET = join(process.cwd(), 'examples/storefront-widget');
const TYPES: Record<string, string> = { '.html': 'text/html; charset=utf-8', '.js': 'text/javascript; charset=utf-8' };

/** The widget's folder as any static host would serve it, on its own port: another origin than the API's. */
async function staticSite(): Promise<{ origin: string; close(): Promise<void> }> {
  const server: Server = createServer((req, res) => {
    const name = (req.url ?? '/').split(/[?#]/)[0] === '/' ? 'index.html' : (req.url ?? '').split(/[?#]/)[0]!.slice(1);
    const type = TYPES[name.slice(name.lastIndexOf('.'))];
    if (!type || name.includes('/') || name.includes('..')) return void res.writeHead(404).end();
    res.writeHead(200, { 'content-type': type }).end(readFileSync(join(WIDGET, name)));
  });
  server.listen(0, '127.0.0.1');
  await new Promise((resolve) => server.once('listening', resolve));
  return {
    origin: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

let t: TestApp;
let shop: { shopId: string; apiKey: string };
let site: Awaited<ReturnType<typeof staticSite>>;
let elsewhere: Awaited<ReturnType<typeof staticSite>>;
let chromium: BrowserSession;

beforeAll(async () => {
  t = await startTestApp();
  shop = await t.shop('Widget shop');
  [site, elsewhere] = [await staticSite(), await staticSite()];
  const setup = await t.graphql(
    shop.apiKey,
    `mutation($o: [String!]) {
      s: shopSettingsUpdate(input: { storefrontOrigins: $o }) { userErrors { code } }
      silver: tierCreate(input: { name: "Silver", threshold: "1000", multiplier: "1" }) { userErrors { code } }
      gold: tierCreate(input: { name: "Gold", threshold: "5000", multiplier: "1.5" }) { userErrors { code } }
      a: pointsRedemptionCreate(input: { name: "$5 off", type: amount, rewardValue: 500, discountValue: 5, discountPrefix: "FIVE-" }) { userErrors { code } }
      b: pointsRedemptionCreate(input: { name: "Free tote", type: shipping, rewardValue: 5000, discountPrefix: "TOTE-" }) { userErrors { code } }
    }`,
    { o: [site.origin] },
  );
  expect(JSON.stringify(setup.data)).not.toContain('"code"');
  // Earned after the ladder exists: the add upgrades the customer to Silver at once.
  await t.customer(shop.shopId, 'w-1');
  expect((await t.post('/rest-api/v1/points/add', { customerIdentifier: 'w-1', amount: 1200 }, shop.apiKey)).status).toBe(200);
  chromium = await openChromium(site.origin);
});

afterAll(async () => {
  await chromium?.close();
  await site?.close();
  await elsewhere?.close();
  await t?.stop();
});

async function mint(): Promise<string> {
  const res = await t.graphql(shop.apiKey, 'mutation { customerAccessTokenCreate(input: { customerIdentifier: "w-1" }) { accessToken } }');
  return res.data.customerAccessTokenCreate.accessToken;
}

const adminPoints = async () => (await t.graphql(shop.apiKey, '{ customer(identifier: "w-1") { points discountCodes(first: 1) { edges { node { code } } } } }')).data.customer;

describe('examples/storefront-widget in a real Chromium, served from another origin', () => {
  it('shows the balance and rewards, redeems one, and follows a change made elsewhere live', async () => {
    const { page } = chromium;
    await page.goto(`${site.origin}/index.html#api=${encodeURIComponent(t.url)}&token=${await mint()}`);
    await page.waitForSelector('body[data-ready="true"]');
    expect(await page.textContent('#balance')).toBe('1,200 points');
    expect(await page.textContent('#tier-name')).toBe('Tier: Silver');
    expect(await page.textContent('#tier-next')).toBe('3800 to Gold');
    expect(await page.isDisabled('button[aria-label^="Redeem $5 off"]')).toBe(false);
    expect(await page.isDisabled('button[aria-label^="Redeem Free tote"]')).toBe(true);
    await chromium.screenshot('storefront-widget.png');

    await page.click('button[aria-label^="Redeem $5 off"]');
    await page.waitForSelector('#discount-code');
    const api = await adminPoints();
    expect(await page.textContent('#discount-code')).toBe(api.discountCodes.edges[0].node.code);
    await until(async () => (await page.textContent('#balance')) === '700 points', 10_000, 'the balance after redeeming');
    expect(api.points).toBe(700);

    // A change the page did not make reaches it through its subscription, without a reload.
    const res = await t.post('/rest-api/v1/points/add', { customerIdentifier: 'w-1', amount: 4300 }, shop.apiKey);
    expect(res.status).toBe(200);
    await until(async () => (await page.textContent('#balance')) === '5,000 points', 10_000, 'the live balance');
    expect(await page.isDisabled('button[aria-label^="Redeem Free tote"]')).toBe(false);
    expect(await page.textContent('#tier-name')).toBe('Tier: Gold');
    await chromium.screenshot('storefront-widget-after-redeem.png');
    expect(chromium.problems).toEqual([]);
  });

  it('from an origin the shop did not list, the browser refuses the answer and the page shows nothing of the customer', async () => {
    const { page } = chromium;
    const before = chromium.problems.length;
    await page.goto(`${elsewhere.origin}/index.html#api=${encodeURIComponent(t.url)}&token=${await mint()}`);
    await page.waitForSelector('body[data-ready="failed"]');
    expect(await page.textContent('#status')).toContain('Could not load your rewards');
    expect(await page.isHidden('#widget')).toBe(true);
    expect(await page.textContent('#balance')).toBe('–');
    // Chromium's own report: the preflight was refused by CORS.
    expect(chromium.problems.slice(before).join('\n')).toMatch(/CORS/);
    await chromium.screenshot('storefront-widget-refused.png');
  });
});
