import { existsSync } from 'node:fs';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type BrowserSession, openChromium } from './chromium.js';
import { startTestApp, type TestApp } from './helpers.js';
import { until } from './live-helpers.js';

let t: TestApp;
let shop: { shopId: string; apiKey: string };
let chromium: BrowserSession;
let page: Page;

beforeAll(async () => {
  t = await startTestApp();
  shop = await t.shop('Dashboard shop');
  await t.customer(shop.shopId, 'd-1', 100);
  chromium = await openChromium(t.url);
  page = chromium.page;
});

afterAll(async () => {
  await chromium?.close();
  await t?.stop();
});

const text = (selector: string) => page.locator(selector).first().textContent();
const addPoints = async (path: 'add' | 'substract', amount: number) => {
  const res = await t.post(`/rest-api/v1/points/${path}`, { customerIdentifier: 'd-1', amount }, shop.apiKey);
  expect(res.status).toBe(200);
  return (await res.json()).activity;
};

describe('GET /dashboard in a real Chromium', () => {
  it('serves the page and everything it loads from this server, with a strict CSP', async () => {
    const res = await fetch(`${t.url}/dashboard`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toContain('text/html');
    expect(res.headers.get('content-security-policy')).toContain("connect-src 'self'");
    const client = await fetch(`${t.url}/dashboard/graphql-ws.js`);
    expect(client.status).toBe(200);
    expect(await client.text()).toContain('graphqlWs');
  });

  it('shows a points change made over REST as it happens, with counts and balances', async () => {
    await page.goto(`${t.url}/dashboard`);
    expect(await text('#status')).toBe('not connected');
    await page.fill('#api-key', shop.apiKey);
    await page.click('#connect-button');
    await page.waitForSelector('#status.live');
    await page.waitForSelector('#topic-list input[value="points/*"]:checked');
    await until(() => t.app.bus.stats().listeners === 1, 10_000, 'the page\'s subscription');

    const activity = await addPoints('add', 25);
    await page.waitForSelector('#events li[data-type="points/added"]');
    expect(await text('#events li .id')).toMatch(/^evt_/);
    const json = JSON.parse((await text('#events li pre'))!);
    expect(json).toEqual(activity);
    expect(await text('#counts tr[data-key="points/added"] td.num')).toBe('1');
    expect(await text(`#balances tr[data-key="${activity.customer}"] td:nth-child(2)`)).toBe('125');
    expect(await text('#points-net')).toBe('+25');
    // People know customers by e-mail and the shop's id, not by our internal _id.
    await page.waitForFunction((id) => document.querySelector(`#balances tr[data-key="${id}"] td`)?.textContent !== '…', activity.customer);
    expect(await text(`#balances tr[data-key="${activity.customer}"] td:nth-child(1)`)).toBe('d-1@example.com (d-1)');
    expect(await page.locator('#balances').innerText()).not.toContain(activity.customer);

    await addPoints('substract', 5);
    await page.waitForFunction(() => document.querySelectorAll('#events li').length === 2);
    expect(await text('#events li .type')).toBe('points/subtracted'); // newest first
    expect(await text(`#balances tr[data-key="${activity.customer}"] td:nth-child(2)`)).toBe('120');
    expect(await text('#points-net')).toBe('+20');
    expect(await text('#count-total')).toBe('2');

    expect(existsSync(await chromium.screenshot('dashboard.png'))).toBe(true);
  });

  it('follows the topic filter: unchecked topics stop arriving', async () => {
    await page.uncheck('#topic-list input[value="points/*"]');
    await page.check('#topic-list input[value="points/updated"]');
    await until(() => t.app.bus.stats().listeners === 1, 10_000, 'the renewed subscription');
    await addPoints('add', 1); // points/added: no longer shown
    const set = await t.post('/rest-api/v1/points/update', { customerIdentifier: 'd-1', amount: 500 }, shop.apiKey);
    expect(set.status).toBe(200);
    await page.waitForSelector('#events li[data-type="points/updated"]');
    expect(await page.locator('#events li').count()).toBe(3);
    expect(await text('#counts tr[data-key="points/added"] td.num')).toBe('1');
    // +20 so far; the unseen +1 is not counted, the set from 121 to 500 is: +379.
    expect(await text('#points-net')).toBe('+399');
  });

  it('says so when the key is refused, and nothing else went wrong on the page', async () => {
    await page.click('#disconnect-button');
    await until(() => t.app.bus.stats().listeners === 0, 10_000, 'the page\'s subscription closed');
    await page.fill('#api-key', 'lk_definitely_wrong');
    await page.click('#connect-button');
    await page.waitForSelector('#status.error');
    expect(await text('#status')).toBe('API key refused');
    expect(chromium.foreignRequests).toEqual([]);
    // The refused socket is logged by the browser; anything else is a bug.
    expect(chromium.problems.filter((p) => !p.includes('WebSocket'))).toEqual([]);
  });
});
