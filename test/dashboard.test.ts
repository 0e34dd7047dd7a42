import { existsSync } from 'node:fs';
import type { Page } from 'playwright-core';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { openDatabase } from '../src/db/database.js';
import { inTransaction } from '../src/db/transaction.js';
import { endCode, lockCode } from '../src/domain/codes/index.js';
import { type BrowserSession, openChromium } from './chromium.js';
import { until } from './live-helpers.js';
import { type NpmServer, startNpm } from './npm-start.js';

// The program page as a shop owner meets it: `npm start` in a fresh folder (on PGlite the demo
// shop, whose customers and rewards count too), its key, a real Chromium. Any console error or
// uncaught exception fails the test it happened in (a test takes away the ones it causes on purpose).

let server: NpmServer;
let chromium: BrowserSession;
let page: Page;
/** The program's figures before this file's own changes: the demo shop's on PGlite, nothing on PostgreSQL. */
let before: Awaited<ReturnType<typeof program>>;
let rewardId: string;

const DAY = 86_400_000;
const fmt = (n: number) => new Intl.NumberFormat('en-US').format(n);
const PROGRAM = `query($from: DateTime!, $to: DateTime!) {
  shop { insights(from: $from, to: $to) { points { issued { total } redeemed expired outstanding pending activeMembers members }
    rewards { name codes used expired cancelled useRate points } tiers { name members } } }
  activities(first: 15) { edges { node { _id newPoints oldPoints holder { email shopifyCustomerId } } } } }`;

/** The last 30 local days' insights and the latest ledger entries, as the API gives them. */
async function program() {
  const now = Date.now();
  const res = await server.graphql(PROGRAM, { from: new Date(now - 29 * DAY).toISOString(), to: new Date(now + 1000).toISOString() });
  expect(res.errors).toBeUndefined();
  const { points, rewards, tiers } = res.data.shop.insights;
  const sum = (f: (p: any) => number) => points.reduce((s: number, p: any) => s + f(p), 0);
  return { points, rewards, tiers, activities: res.data.activities.edges, last: points.at(-1), issued: sum((p) => p.issued.total), redeemed: sum((p) => p.redeemed), expired: sum((p) => p.expired) };
}

beforeAll(async () => {
  server = await startNpm();
  before = await program();
  const setup = await server.graphql(
    `mutation {
      o: earningRuleCreate(input: { type: place_order, name: "1 per $1", earnPoint: 1, spent: "1.00" }) { userErrors { code } }
      t: tierCreate(input: { name: "Gold", threshold: "300", multiplier: "1" }) { userErrors { code } }
      r: pointsRedemptionCreate(input: { name: "Dashboard $5 off", type: amount, rewardValue: 50, discountValue: 5 }) { pointsRedemption { _id } userErrors { code } }
      c1: customerUpsert(input: { shopifyCustomerId: "d-1", email: "d-1@example.com" }) { userErrors { code } }
      c2: customerUpsert(input: { shopifyCustomerId: "d-2", email: "d-2@example.com" }) { userErrors { code } }
      c3: customerUpsert(input: { shopifyCustomerId: "d-3", email: "d-3@example.com" }) { userErrors { code } }
    }`,
  );
  expect(JSON.stringify(setup)).not.toContain('"code"');
  for (const [id, points] of [['d-1', 100], ['d-2', 400]] as const) {
    expect((await server.request('POST', '/rest-api/v1/points/add', { customerIdentifier: id, amount: points })).status).toBe(200);
  }
  const order = await server.request('PUT', '/rest-api/v1/orders/o-1', {
    customerIdentifier: 'd-3', currency: 'USD', subtotal: '80.00', total: '80.00', status: 'paid', lineItems: [{ productId: 'p', quantity: 1, price: '80.00' }],
  });
  expect(order.status).toBe(201);
  const redeemed = await server.request('POST', '/rest-api/v1/pointsRedemptions', { customerIdentifier: 'd-2', rewardId: setup.data.r.pointsRedemption._id, pointsAmount: 50 });
  expect(redeemed.status).toBe(200);
  rewardId = setup.data.r.pointsRedemption._id;
  chromium = await openChromium(server.url);
  page = chromium.page;
}, 300_000);

afterEach(() => chromium.expectClean());

afterAll(async () => {
  await chromium?.close();
  await server?.stop();
});

const text = (selector: string) => page.locator(selector).first().textContent();
const addPoints = async (path: 'add' | 'substract', amount: number) => {
  const res = await server.request('POST', `/rest-api/v1/points/${path}`, { customerIdentifier: 'd-1', amount });
  expect(res.status).toBe(200);
  return (await res.json()).activity;
};

/** The server's live subscriptions, from /metrics. */
async function liveSubscriptions(): Promise<number> {
  const metrics = await (await fetch(`${server.url}/metrics`)).text();
  return Number(/^loyalty_live_subscriptions (\d+)$/m.exec(metrics)![1]);
}

/** What the page should show, read from the API: the last 30 local days' insights and the latest entries. */
async function fromApi() {
  const { rewards, tiers, activities, last, issued, redeemed, expired } = await program();
  return {
    kpis: {
      '#kpi-members': fmt(last.members),
      '#kpi-active': fmt(last.activeMembers),
      '#kpi-outstanding': fmt(last.outstanding),
      '#kpi-pending': fmt(last.pending),
      '#kpi-issued': fmt(issued),
      '#kpi-redeemed': fmt(redeemed),
      '#kpi-rate': `${((redeemed * 100) / issued).toFixed(1)} %`,
      '#kpi-expired': fmt(expired),
    },
    rewards: rewards.map((r: any) => [r.name, fmt(r.codes), fmt(r.used), fmt(r.expired), fmt(r.cancelled), r.useRate === null ? '–' : `${(r.useRate * 100).toFixed(2)} %`, fmt(r.points)]),
    tiers: [['No tier', fmt(last.members - tiers.reduce((s: number, x: any) => s + x.members, 0))], ...tiers.map((x: any) => [x.name, fmt(x.members)])],
    activities: activities.map(({ node }: any) => [node._id, `${node.holder.email} (${node.holder.shopifyCustomerId})`, fmt(node.newPoints)]),
  };
}

/** The figures the page shows, read off its DOM. */
async function shown() {
  const kpis: Record<string, string | null> = {};
  for (const id of ['members', 'active', 'outstanding', 'pending', 'issued', 'redeemed', 'rate', 'expired']) kpis[`#kpi-${id}`] = await text(`#kpi-${id}`);
  const rows = (selector: string, cells: number[]) =>
    page.$$eval(`${selector} tbody tr`, (trs, cells) => trs.map((tr) => cells.map((i) => tr.children[i]?.textContent ?? '')), cells);
  return {
    kpis,
    rewards: await rows('#rewards-table', [0, 2, 3, 4, 5, 6, 7]),
    tiers: await rows('#tiers-table', [0, 1]),
    activities: await page.$$eval('#activity tbody tr', (trs) => trs.map((tr) => [(tr as HTMLElement).dataset.key, tr.children[0]!.textContent, tr.children[3]!.textContent])),
  };
}

/** Until the page shows what the API says (the page refreshes a moment after each event). */
async function untilShowsApi(what: string) {
  let last: unknown;
  await until(async () => {
    const [api, page] = await Promise.all([fromApi(), shown()]);
    last = { api, page };
    return JSON.stringify(api) === JSON.stringify(page);
  }, 15_000, `${what}: ${JSON.stringify(last)}`);
}

/** WCAG's contrast ratio of an element's text against the first opaque background behind it. */
function contrastOf(selector: string) {
  return page.$eval(selector, (el) => {
    const rgb = (c: string) => (c.match(/[\d.]+/g) ?? []).map(Number);
    const luminance = ([r, g, b]: number[]) => {
      const lin = (v: number) => ((v /= 255) <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4);
      return 0.2126 * lin(r!) + 0.7152 * lin(g!) + 0.0722 * lin(b!);
    };
    let bg: number[] = [255, 255, 255];
    for (let e: Element | null = el; e; e = e.parentElement) {
      const c = rgb(getComputedStyle(e).backgroundColor);
      if (c.length === 3 || (c.length === 4 && c[3] === 1)) {
        bg = c.slice(0, 3);
        break;
      }
    }
    const [a, b] = [luminance(rgb(getComputedStyle(el).color)), luminance(bg)];
    return (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05);
  });
}

describe('GET /dashboard, the program page, in a real Chromium', () => {
  it('serves the page and everything it loads (Chart.js included) from this server, with a strict CSP', async () => {
    const res = await fetch(`${server.url}/dashboard`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toContain('text/html');
    expect(res.headers.get('content-security-policy')).toContain("connect-src 'self'");
    for (const [path, global] of [['/dashboard/graphql-ws.js', 'graphqlWs'], ['/dashboard/chart.js', 'Chart']]) {
      const script = await fetch(`${server.url}${path}`);
      expect(script.status).toBe(200);
      expect(await script.text()).toContain(global);
    }
  });

  it('can be used with the keyboard alone: every control labelled, the key typed and submitted', async () => {
    await page.goto(`${server.url}/dashboard`);
    expect(await text('#status')).toBe('not connected');
    const unlabelled = await page.$$eval('input, select, button', (els) =>
      els.filter((el) => !(el as HTMLInputElement).labels?.length && !el.textContent?.trim() && !el.closest('label')).map((el) => el.outerHTML),
    );
    expect(unlabelled).toEqual([]);
    expect(await page.$$eval('canvas', (cs) => cs.every((c) => c.getAttribute('role') === 'img' && (c.getAttribute('aria-label') ?? '').length > 20))).toBe(true);
    for (let i = 0; i < 10 && (await page.evaluate(() => document.activeElement?.id)) !== 'api-key'; i++) await page.keyboard.press('Tab');
    expect(await page.evaluate(() => document.activeElement?.id)).toBe('api-key');
    await page.keyboard.type(server.apiKey);
    await page.keyboard.press('Enter');
    await page.waitForSelector('#status.live');
    await until(async () => (await liveSubscriptions()) === 1, 10_000, 'the page\'s subscription');
    await page.waitForSelector('body[data-refreshed-at]');
    // The key lives in the page's memory only.
    expect(await page.evaluate(() => JSON.stringify({ ...localStorage }) + JSON.stringify({ ...sessionStorage }) + document.cookie)).not.toContain(server.apiKey);
  });

  it('shows the figures the API gives, at 1280 px, with text contrast of at least 4.5:1', async () => {
    await untilShowsApi('the first figures');
    const first = await shown();
    const members = before.last.members + 3;
    expect(first.kpis['#kpi-members']).toBe(fmt(members));
    expect(first.kpis['#kpi-redeemed']).toBe(fmt(before.redeemed + 50));
    // Gold (300 points earned): d-2, and on PGlite the demo shop's grace@example.com (1,200).
    const gold = server.demo ? 2 : 1;
    expect(first.tiers).toEqual([['No tier', fmt(members - gold)], ['Gold', fmt(gold)]]);
    expect(first.rewards).toContainEqual(['Dashboard $5 off', '1', '0', '0', '0', '0.00 %', '50']);
    expect(first.activities[0]![1]).toBe('d-2@example.com (d-2)');
    // Every table of the charts holds the series the chart draws: one row per day of the period.
    expect(await page.locator('#flow-table tbody tr').count()).toBeGreaterThanOrEqual(30);
    for (const selector of ['h1', '.kpis dt', '.kpis dd', '.kpis dd.sub', '.hint', '#activity td', 'button[type=submit]', 'summary', '.status']) {
      expect(await contrastOf(selector), selector).toBeGreaterThanOrEqual(4.5);
    }
    // Nothing wider than the window.
    expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(1280);
    expect(existsSync(await chromium.screenshot('dashboard-1280.png'))).toBe(true);
  });

  it('shows a change made over REST without a reload: figures, recent activity and the live event', async () => {
    await page.evaluate(() => ((window as any).notReloaded = true));
    const before = await text('#kpi-outstanding');
    const activity = await addPoints('add', 25);
    await page.waitForSelector('#events li[data-type="points/added"]');
    expect(JSON.parse((await text('#events li pre'))!)).toEqual(activity);
    await page.waitForSelector(`#activity tbody tr[data-key="${activity._id}"]`);
    await untilShowsApi('after points/add');
    const after = await shown();
    expect(Number(after.kpis['#kpi-outstanding']!.replace(/,/g, ''))).toBe(Number(before!.replace(/,/g, '')) + 25);
    expect(after.activities[0]).toEqual([activity._id, 'd-1@example.com (d-1)', '125']);
    expect(await text('#counts tr[data-key="points/added"] td.num')).toBe('1');
    expect(await page.evaluate(() => (window as any).notReloaded)).toBe(true);
  });

  it('reads well on a phone width: one column, nothing wider than the screen', async () => {
    await page.setViewportSize({ width: 390, height: 844 });
    await page.waitForFunction(() => document.documentElement.scrollWidth <= 390);
    const boxes = await page.$$eval('.kpis > div, .charts > section', (els) => els.map((el) => el.getBoundingClientRect().right));
    expect(Math.max(...boxes)).toBeLessThanOrEqual(390);
    // The charts stack: each as wide as the page's column.
    const widths = await page.$$eval('.charts > section', (els) => els.map((el) => Math.round(el.getBoundingClientRect().width)));
    expect(new Set(widths).size).toBe(1);
    await untilShowsApi('at 390 px');
    expect(existsSync(await chromium.screenshot('dashboard-390.png'))).toBe(true);
    await page.setViewportSize({ width: 1280, height: 900 });
  });

  it('lists only the checked topics, while the figures follow every event', async () => {
    await page.uncheck('#topic-list input[value="points/*"]');
    await page.check('#topic-list input[value="points/updated"]');
    const listed = await page.locator('#events li').count();
    const added = await addPoints('add', 1); // points/added: counted, not listed
    const set = await server.request('POST', '/rest-api/v1/points/update', { customerIdentifier: 'd-1', amount: 500 });
    expect(set.status).toBe(200);
    await page.waitForSelector('#events li[data-type="points/updated"]');
    expect(await page.locator('#events li').count()).toBe(listed + 1);
    expect(await page.locator(`#events li pre:has-text("${added._id}")`).count()).toBe(0);
    expect(await text('#counts tr[data-key="points/added"] td.num')).toBe('2');
    await untilShowsApi('after the set');
    expect((await shown()).kpis['#kpi-outstanding']).toBe(fmt(before.last.outstanding + 500 + 350 + 80));
  });

  it('shows each reward\'s codes issued, used, expired and cancelled, and the use rate', async () => {
    const codes: string[] = [];
    for (let i = 0; i < 3; i++) {
      const res = await server.request('POST', '/rest-api/v1/pointsRedemptions', { customerIdentifier: 'd-2', rewardId, pointsAmount: 50 });
      expect(res.status).toBe(200);
      codes.push((await res.json()).discountCode);
    }
    // Ended as a shop ends them: an order uses the first, the shop cancels the third. A code expires
    // by the scheduler at its reward's expiry, days away: on PostgreSQL the test ends the second in
    // the server's database, as the expiry sweep does.
    const order = await server.request('PUT', '/rest-api/v1/orders/dash-code-order', {
      customerIdentifier: 'd-2', currency: 'USD', subtotal: '20.00', shipping: '0', tax: '0', total: '20.00', refunded: '0', status: 'paid',
      lineItems: [{ productId: 'p-1', collectionIds: [], quantity: 1, price: '20.00', discount: '0', refundedQuantity: 0 }],
      discountCodes: [{ code: codes[0], amount: '5.00' }],
    });
    expect(order.status, await order.clone().text()).toBeLessThan(300);
    expect((await server.request('POST', `/rest-api/v1/pointsRedemptions/${codes[2]}/cancel`, {})).status).toBe(200);
    if (server.databaseUrl) {
      const { db, close } = await openDatabase({ url: server.databaseUrl });
      try {
        await inTransaction(db, async (trx) => {
          await trx.updateTable('discount_codes').set({ expires_at: new Date(Date.now() - 60_000) }).where('code', '=', codes[1]!).execute();
          const { shop_id } = await trx.selectFrom('discount_codes').select('shop_id').where('code', '=', codes[1]!).executeTakeFirstOrThrow();
          expect((await endCode(trx, (await lockCode(trx, shop_id, { code: codes[1]! }))!, { status: 'expired' })).changed).toBe(true);
        });
      } finally {
        await close();
      }
    }
    await addPoints('add', 1); // an event: the page refreshes
    await untilShowsApi('after the codes');
    const row = (await shown()).rewards.find((r) => r[0] === 'Dashboard $5 off');
    expect(row).toEqual(['Dashboard $5 off', '4', '1', server.databaseUrl ? '1' : '0', '1', '25.00 %', '200']);
  });

  it('says so when the key is refused, and nothing else went wrong on the page', async () => {
    await page.click('#disconnect-button');
    await until(async () => (await liveSubscriptions()) === 0, 10_000, 'the page\'s subscription closed');
    await page.fill('#api-key', 'lk_definitely_wrong');
    await page.click('#connect-button');
    await page.waitForSelector('#status.error');
    expect(await text('#status')).toBe('API key refused');
  });
});
