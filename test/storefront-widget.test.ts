import { readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import type { Page } from 'playwright-core';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { type BrowserSession, openChromium } from './chromium.js';
import { until } from './live-helpers.js';
import { type NpmServer, startNpm } from './npm-start.js';

// examples/storefront-widget as a shop would run it: the page on a static host of its own origin,
// calling a real `npm start` (a fresh folder, the demo shop's printed key mints the tokens) from a
// real Chromium. Any console error or uncaught exception fails the test it happened in.

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

let server: NpmServer;
let site: Awaited<ReturnType<typeof staticSite>>;
let elsewhere: Awaited<ReturnType<typeof staticSite>>;
let chromium: BrowserSession;
let page: Page;

/** Runs admin operations with the shop's key; fails on any error or userError. */
async function admin(query: string, variables?: Record<string, unknown>) {
  const res = await server.graphql(query, variables);
  expect(res.errors).toBeUndefined();
  expect(JSON.stringify(res.data)).not.toMatch(/"userErrors":\[\{/);
  return res.data;
}

beforeAll(async () => {
  server = await startNpm();
  [site, elsewhere] = [await staticSite(), await staticSite()];
  await admin(
    `mutation($o: [String!]) {
      s: shopSettingsUpdate(input: { storefrontOrigins: $o }) { userErrors { code } }
      c: customerUpsert(input: { shopifyCustomerId: "w-1", email: "w-1@example.com" }) { userErrors { code } }
      a: pointsRedemptionCreate(input: { name: "Widget $5 off", type: amount, rewardValue: 500, discountValue: 5, discountPrefix: "FIVE-" }) { userErrors { code } }
      b: pointsRedemptionCreate(input: { name: "Canvas tote", type: free_product, rewardValue: 3000, applyProductOption: products, applyVariants: ["tote-blue", "tote-red"], discountPrefix: "TOTE-" }) { userErrors { code } }
      m: pointsRedemptionCreate(input: { name: "Coffee mug", type: free_product, rewardValue: 1000, applyProductOption: products, applyVariants: ["mug-white"], discountPrefix: "MUG-" }) { userErrors { code } }
      f: pointsRedemptionCreate(input: { name: "Any scarf", type: free_product, rewardValue: 400, applyProductOption: products, applyProducts: ["scarf"], discountPrefix: "SCARF-" }) { userErrors { code } }
    }`,
    { o: [site.origin] },
  );
  chromium = await openChromium(site.origin, elsewhere.origin, server.url);
  page = chromium.page;
}, 300_000);

afterEach(() => chromium.expectClean());

afterAll(async () => {
  await chromium?.close();
  await site?.close();
  await elsewhere?.close();
  await server?.stop();
});

async function mint(): Promise<string> {
  return (await admin('mutation { customerAccessTokenCreate(input: { customerIdentifier: "w-1" }) { accessToken } }')).customerAccessTokenCreate.accessToken;
}

async function openWidget(origin = site.origin) {
  // From a blank page: a new token alone changes only the fragment, which reloads nothing.
  await page.goto('about:blank');
  await page.goto(`${origin}/index.html#api=${encodeURIComponent(server.url)}&token=${await mint()}`);
}

const latestCode = async () =>
  (await admin('{ customer(identifier: "w-1") { points discountCodes(first: 1) { edges { node { code variantId } } } } }')).customer;

describe('examples/storefront-widget in a real Chromium, served from another origin, against npm start', () => {
  it('shows the way to the next tier in the shop\'s currency when tiers count money spent', async () => {
    await admin(`mutation {
      s: shopSettingsUpdate(input: { currency: "EUR", tiers: { metric: amount_spent } }) { userErrors { code } }
      g: tierCreate(input: { name: "Gold", threshold: "300.00" }) { userErrors { code } }
    }`);
    const order = await server.request('PUT', '/rest-api/v1/orders/w-order-1', {
      customerIdentifier: 'w-1', currency: 'EUR', subtotal: '84.97', total: '84.97', status: 'paid', lineItems: [{ productId: 'p', quantity: 1, price: '84.97' }],
    });
    expect(order.status).toBe(201);
    await openWidget();
    await page.waitForSelector('body[data-ready="true"]');
    expect(await page.textContent('#tier-name')).toBe('No tier yet');
    // 300.00 − 84.97, formatted as the shop's currency.
    expect(await page.textContent('#tier-next')).toBe('€215.03 to Gold');
    await chromium.screenshot('storefront-widget-amount-spent.png');

    // The ladder moves to points (no one holds Gold, so it can go): the next test's.
    const gold = (await admin('{ tiers { id } }')).tiers[0].id;
    await admin(`mutation($id: ID!) {
      d: tierDelete(id: $id) { userErrors { code } }
      s: shopSettingsUpdate(input: { tiers: { metric: points_earned } }) { userErrors { code } }
      silver: tierCreate(input: { name: "Silver", threshold: "1000", multiplier: "1" }) { userErrors { code } }
      gold: tierCreate(input: { name: "Gold", threshold: "5000", multiplier: "1.5" }) { userErrors { code } }
    }`, { id: gold });
    // Earned after the ladder exists: the add upgrades the customer to Silver at once.
    expect((await server.request('POST', '/rest-api/v1/points/add', { customerIdentifier: 'w-1', amount: 1200 })).status).toBe(200);
  });

  it('shows the balance, points to the next tier and rewards, redeems one, and follows a change made elsewhere live', async () => {
    await openWidget();
    await page.waitForSelector('body[data-ready="true"]');
    expect(await page.textContent('#balance')).toBe('1,200 points');
    expect(await page.textContent('#tier-name')).toBe('Tier: Silver');
    expect(await page.textContent('#tier-next')).toBe('3,800 points to Gold');
    expect(await page.isDisabled('button[aria-label^="Redeem Widget $5 off"]')).toBe(false);
    expect(await page.isDisabled('button[aria-label^="Redeem Canvas tote"]')).toBe(true);
    await chromium.screenshot('storefront-widget.png');

    await page.click('button[aria-label^="Redeem Widget $5 off"]');
    await page.waitForSelector('#discount-code');
    const api = await latestCode();
    expect(await page.textContent('#discount-code')).toBe(api.discountCodes.edges[0].node.code);
    await until(async () => (await page.textContent('#balance')) === '700 points', 10_000, 'the balance after redeeming');
    expect(api.points).toBe(700);

    // A change the page did not make reaches it through its subscription, without a reload.
    const res = await server.request('POST', '/rest-api/v1/points/add', { customerIdentifier: 'w-1', amount: 4300 });
    expect(res.status).toBe(200);
    await until(async () => (await page.textContent('#balance')) === '5,000 points', 10_000, 'the live balance');
    expect(await page.isDisabled('button[aria-label^="Redeem Canvas tote"]')).toBe(false);
    expect(await page.textContent('#tier-name')).toBe('Tier: Gold');
    expect(await page.textContent('#tier-next')).toBe('Top tier reached');
    await chromium.screenshot('storefront-widget-after-redeem.png');
  });

  it('redeems a free product for the variant the customer picks, the reward\'s only one, or one of its products\' given by id', async () => {
    // Two variants on offer: the customer picks one.
    const tote = page.locator('li', { has: page.locator('button[aria-label^="Redeem Canvas tote"]') });
    const choice = tote.getByRole('combobox', { name: 'Variant of Canvas tote' });
    expect(await choice.locator('option').allTextContents()).toEqual(['tote-blue', 'tote-red']);
    await choice.selectOption('tote-red');
    // The choice outlives the list's redrawing after each change, a live one included.
    expect((await server.request('POST', '/rest-api/v1/points/add', { customerIdentifier: 'w-1', amount: 1 })).status).toBe(200);
    await until(async () => (await page.textContent('#balance')) === '5,001 points', 10_000, 'the live balance');
    expect(await choice.inputValue()).toBe('tote-red');
    await tote.getByRole('button').click();
    await until(async () => (await page.textContent('#result'))?.startsWith('Canvas tote (tote-red): use ') ?? false, 10_000, 'the tote\'s code');
    let api = await latestCode();
    expect(api.discountCodes.edges[0].node).toEqual({ code: await page.textContent('#discount-code'), variantId: 'tote-red' });
    await until(async () => (await page.textContent('#balance')) === '2,001 points', 10_000, 'the balance after the tote');

    // One variant: nothing to pick, and it is the one redeemed.
    const mug = page.locator('li', { has: page.locator('button[aria-label^="Redeem Coffee mug"]') });
    expect(await mug.locator('select, input').count()).toBe(0);
    await mug.getByRole('button').click();
    await until(async () => (await page.textContent('#result'))?.startsWith('Coffee mug (mug-white): use ') ?? false, 10_000, 'the mug\'s code');
    api = await latestCode();
    expect(api.discountCodes.edges[0].node).toEqual({ code: await page.textContent('#discount-code'), variantId: 'mug-white' });
    expect(api.points).toBe(1001);
    expect(await page.textContent('#status')).toBe('');

    // Products without a list of variants: any variant of them, which the storefront knows and the
    // service does not; the widget takes its id. Without one, the refusal names the field.
    const scarf = page.locator('li', { has: page.locator('button[aria-label^="Redeem Any scarf"]') });
    const variantId = scarf.getByRole('textbox', { name: 'Variant of Any scarf (variant id)' });
    await scarf.getByRole('button').click();
    await until(async () => (await page.textContent('#status')) === 'variantId: required', 10_000, 'the refusal');
    expect((await latestCode()).points).toBe(1001);
    await variantId.fill('scarf-green');
    await scarf.getByRole('button').click();
    await until(async () => (await page.textContent('#result'))?.startsWith('Any scarf (scarf-green): use ') ?? false, 10_000, 'the scarf\'s code');
    api = await latestCode();
    expect(api.discountCodes.edges[0].node).toEqual({ code: await page.textContent('#discount-code'), variantId: 'scarf-green' });
    expect(api.points).toBe(601);
    expect(await page.textContent('#status')).toBe('');
  });

  it('from an origin the shop did not list, the browser refuses the answer and the page shows nothing of the customer', async () => {
    await openWidget(elsewhere.origin);
    await page.waitForSelector('body[data-ready="failed"]');
    expect(await page.textContent('#status')).toContain('Could not load your rewards');
    expect(await page.isHidden('#widget')).toBe(true);
    expect(await page.textContent('#balance')).toBe('–');
    // Chromium's own report: the preflight was refused by CORS.
    chromium.expectProblems(/CORS/, /ERR_FAILED/);
    await chromium.screenshot('storefront-widget-refused.png');
  });
});
