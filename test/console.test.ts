import { readFile } from 'node:fs/promises';
import type { Page } from 'playwright-core';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { type BrowserSession, openChromium } from './chromium.js';
import { type NpmServer, startNpm } from './npm-start.js';
import { type Receiver, startReceiver } from './webhook-receiver.js';

// The staff console as a shop's people meet it: `npm start`, one-time invite links the owner's key
// asks for, a real Chromium per person. What a role may not do is refused by the server, whatever
// the page shows; every value a customer, an order or a rule can carry is shown as text.

let server: NpmServer;
/** The shop's webhook endpoint (https on loopback, allowed by WEBHOOK_ALLOWED_HOSTS). */
let receiver: Receiver;
const people: BrowserSession[] = [];
/** Markup a hostile customer or shop could put into any field the console shows. */
const HOSTILE = `<img src=x onerror="window.__xss=1">`;
const PASSWORD = 'correct horse battery';

async function invite(email: string, role: string): Promise<string> {
  const res = await server.graphql(`mutation($email: String!, $role: StaffRole!) { staffInvite(input: { email: $email, role: $role }) { link userErrors { code message } } }`, { email, role });
  expect(res.data.staffInvite.userErrors).toEqual([]);
  return res.data.staffInvite.link;
}

/** A person's own browser, signed in by accepting their invite in the page, as they would. */
async function joined(email: string, role: string, viewport = { width: 1280, height: 900 }): Promise<BrowserSession> {
  const session = await openChromium(server.url);
  people.push(session);
  await session.page.setViewportSize(viewport);
  await session.page.goto(await invite(email, role));
  await session.page.getByLabel('Your name').fill(`${role} person`);
  await session.page.getByLabel(/Choose a password/).fill(PASSWORD);
  await session.page.getByRole('button', { name: 'Join' }).click();
  await session.page.getByRole('search').waitFor();
  await expect.poll(() => session.page.locator('#whoami').textContent()).toContain(role);
  return session;
}

async function openCustomer(page: Page, query: string, email: string) {
  await page.getByLabel('E-mail, shop customer id or code').fill(query);
  await page.getByRole('button', { name: 'Search' }).click();
  await page.getByRole('link', { name: email }).click();
  await page.getByRole('heading', { name: new RegExp(email.replace('.', '\\.')) }).waitFor();
}

const balance = async (id: string) => (await server.graphql(`query($id: String!) { customer(identifier: $id) { points } }`, { id })).data.customer.points as number;

beforeAll(async () => {
  receiver = await startReceiver();
  server = await startNpm({ WEBHOOK_ALLOWED_HOSTS: 'localhost' });
  const setup = await server.graphql(
    `mutation($hostile: String!) {
      t: tierCreate(input: { name: "Console Gold", threshold: "100000", multiplier: "2" }) { userErrors { code } }
      r: pointsRedemptionCreate(input: { name: $hostile, type: amount, rewardValue: 50, discountValue: 5 }) { pointsRedemption { _id } userErrors { code } }
      c1: customerUpsert(input: { shopifyCustomerId: "con-1", email: "con-1@example.com" }) { userErrors { code } }
      c2: customerUpsert(input: { shopifyCustomerId: "con-2", email: "con-2@example.com" }) { userErrors { code } }
      p1: pointsAdd(input: { customerIdentifier: "con-1", amount: 300, description: $hostile, note: $hostile }) { userErrors { code } }
      # Several people's screens in one minute, each a few units of the shop's GraphQL limit: room for all of them.
      s: shopSettingsUpdate(input: { rateLimitPerMinute: 10000 }) { userErrors { code } }
    }`,
    { hostile: HOSTILE },
  );
  expect(JSON.stringify(setup)).not.toContain('"code"');
  const redeemed = await server.request('POST', '/rest-api/v1/pointsRedemptions', { customerIdentifier: 'con-1', rewardId: setup.data.r.pointsRedemption._id, pointsAmount: 50 });
  expect(redeemed.status).toBe(200);
  const order = await server.request('PUT', `/rest-api/v1/orders/${encodeURIComponent('con-o-1')}`, {
    customerIdentifier: 'con-1', currency: 'USD', subtotal: '20.00', total: '20.00', status: 'paid', lineItems: [{ productId: HOSTILE, quantity: 1, price: '20.00' }],
  });
  expect(order.status).toBe(201);
}, 300_000);

afterEach(() => {
  for (const person of people) person.expectClean();
});

afterAll(async () => {
  for (const person of people) await person.close();
  await server?.stop();
  await receiver?.close();
});

describe('the staff console', () => {
  it('an owner joins by the link, finds a customer, adjusts points with a reason and cancels a code; hostile text stays text', async () => {
    const { page, screenshot } = await joined('owner@console.test', 'owner');
    await openCustomer(page, 'con-1@', 'con-1@example.com');
    expect(await page.locator('#c-points').textContent()).toBe('250');
    // The hostile description and note show as the characters they are, and run nothing.
    await expect.poll(() => page.locator('#ledger tbody').textContent()).toContain(HOSTILE);
    expect(await page.evaluate(() => (window as unknown as { __xss?: number }).__xss)).toBeUndefined();
    expect(await page.locator('#ledger img, #codes img, #orders img').count()).toBe(0);

    await page.getByLabel(/^Points/).fill('25');
    await page.getByLabel('Internal reason').fill('goodwill: late parcel');
    await page.getByLabel('Note the customer may see').fill('Sorry for the wait');
    await page.getByRole('button', { name: 'Adjust' }).click();
    await expect.poll(() => page.locator('#c-points').textContent()).toBe('275');
    expect(await balance('con-1')).toBe(275);
    const ledger = await server.graphql(`{ customer(identifier: "con-1") { activities(first: 1) { edges { node { description note newPoints } } } } }`);
    expect(ledger.data.customer.activities.edges[0].node).toEqual({ description: 'Sorry for the wait', note: 'goodwill: late parcel', newPoints: 275 });

    const cancel = page.getByRole('button', { name: /^Cancel the code/ });
    await cancel.click();
    await expect.poll(() => page.locator('#codes tbody').textContent()).toContain('cancelled');
    await expect.poll(() => page.locator('#c-points').textContent()).toBe('325');
    await screenshot('console-owner-customer.png');

    // The audit log (audit.js): the owner's own changes newest first, the key's hostile note as text.
    await page.getByRole('link', { name: 'Audit log' }).click();
    await expect.poll(() => page.locator('#audit-rows tbody tr').first().textContent()).toContain('discountCode.cancel');
    expect(await page.locator('#audit-rows tbody tr').first().textContent()).toContain('owner@console.test');
    // Inside a JSON string, its quotes escaped.
    await expect.poll(() => page.locator('#audit-rows tbody').textContent()).toContain(JSON.stringify(HOSTILE).slice(1, -1));
    expect(await page.locator('#audit-rows img').count()).toBe(0);
    await page.getByLabel('Kind (e.g. points.add)').fill('points.add');
    await page.getByRole('button', { name: 'Filter' }).click();
    // The key's 300 at setup and the owner's 25; the redemption and the order are not audited.
    await expect.poll(() => page.locator('#audit-rows tbody tr').count()).toBe(2);
  });

  it('a viewer reads the customer, and the server refuses the adjustment the page lets them try', async () => {
    const { page, expectProblems } = await joined('viewer@console.test', 'viewer');
    await openCustomer(page, 'con-2', 'con-2@example.com');
    const before = await balance('con-2');
    await page.getByLabel(/^Points/).fill('1000');
    await page.getByLabel('Internal reason').fill('trying');
    await page.getByRole('button', { name: 'Adjust' }).click();
    await expect.poll(() => page.locator('#message').textContent()).toMatch(/role|not allowed|forbidden/i);
    expectProblems(/403/);
    expect(await balance('con-2')).toBe(before);
  });

  it('support adjusts points but the server refuses them the program: a rule made from their session changes nothing', async () => {
    const { page, expectProblems } = await joined('support@console.test', 'support');
    await openCustomer(page, 'con-2', 'con-2@example.com');
    await page.getByLabel(/^Points/).fill('40');
    await page.getByLabel('Internal reason').fill('support credit');
    await page.getByRole('button', { name: 'Adjust' }).click();
    await expect.poll(() => balance('con-2')).toBe(40);

    // Support holds the customer at a tier their points do not reach, until a date, then ends it.
    const until = new Date(Date.now() + 30 * 86_400_000).toISOString().slice(0, 10);
    await page.getByLabel('Tier', { exact: true }).selectOption({ label: 'Console Gold' });
    await page.getByLabel('Until').fill(until);
    await page.locator('#override-reason').fill('VIP by arrangement');
    await page.getByRole('button', { name: 'Override' }).click();
    await expect.poll(() => page.locator('#override-now').textContent()).toContain('Held at Console Gold');
    const held = await server.graphql(`{ customer(identifier: "con-2") { tier { tier { name } } tierOverride { reason until } } }`);
    expect(held.data.customer.tier.tier.name).toBe('Console Gold');
    expect(held.data.customer.tierOverride.reason).toBe('VIP by arrangement');
    // The end of the chosen day in the browser's zone (this machine's, as the test's).
    expect(new Date(held.data.customer.tierOverride.until).getTime()).toBe(new Date(`${until}T23:59:59`).getTime());
    await page.getByRole('button', { name: 'End the override now' }).click();
    await expect.poll(() => page.locator('#override-now').textContent()).toBe('');
    expect((await server.graphql(`{ customer(identifier: "con-2") { tierOverride { reason } } }`)).data.customer.tierOverride).toBeNull();
    // What no screen offers them, sent from their own session as a page could: refused by the server.
    const answer = await page.evaluate(async () => {
      const session = await (await fetch('/admin/session')).json();
      const res = await fetch('/graphql', {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-csrf-token': session.csrfToken },
        body: JSON.stringify({ query: 'mutation { earningRuleCreate(input: { type: place_order, name: "sneaky", earnPoint: 100, spent: "1.00" }) { userErrors { code } } }' }),
      });
      return { status: res.status, body: await res.json() };
    });
    expectProblems(/403/);
    expect(answer.status).toBe(403);
    expect(answer.body.errors[0].extensions.code).toBe('forbidden');
    const rules = await server.graphql('{ earningRules { name } }');
    expect(rules.data.earningRules.map((r: { name: string }) => r.name)).not.toContain('sneaky');
  });

  it('works from the keyboard alone, and on a phone without sideways scrolling', async () => {
    const session = await joined('keys@console.test', 'support', { width: 390, height: 844 });
    const { page, screenshot } = session;
    expect(await page.evaluate(() => document.documentElement.scrollWidth <= window.innerWidth)).toBe(true);
    await page.locator('#search-query').focus();
    await page.keyboard.type('con-2');
    await page.keyboard.press('Enter');
    await page.getByRole('link', { name: 'con-2@example.com' }).waitFor();
    await page.getByRole('link', { name: 'con-2@example.com' }).focus();
    await page.keyboard.press('Enter');
    await page.getByRole('heading', { name: /con-2@example\.com/ }).waitFor();
    await page.getByLabel(/^Points/).focus();
    await page.keyboard.type('5');
    await page.keyboard.press('Tab');
    expect(await page.evaluate(() => document.activeElement?.id)).toBe('adjust-reason');
    await page.keyboard.type('keyboard credit');
    await page.keyboard.press('Enter');
    await expect.poll(() => page.locator('#message').textContent()).toContain('done');
    expect(await page.evaluate(() => document.documentElement.scrollWidth <= window.innerWidth)).toBe(true);
    await screenshot('console-phone.png');

    // Signing out ends the session: the page asks for a sign-in, and the old cookie opens nothing.
    await page.getByRole('button', { name: 'Sign out' }).focus();
    await page.keyboard.press('Enter');
    await page.getByRole('heading', { name: 'Sign in' }).waitFor();
    const after = await page.evaluate(async () => (await fetch('/admin/session')).status);
    session.expectProblems(/401/);
    expect(after).toBe(401);
  });
});

/** A screen's answer after a save: a mutation and the screen read again, on a machine that may be busy. */
const PAGE = { timeout: 10_000 };

/** The server's live subscriptions, from /metrics. */
async function liveSubscriptions(): Promise<number> {
  const metrics = await (await fetch(`${server.url}/metrics`)).text();
  return Number(/^loyalty_live_subscriptions (\d+)$/m.exec(metrics)![1]);
}

/** Whether the page fits its width: no sideways scrolling. */
const fitsWidth = (page: Page) => page.evaluate(() => document.documentElement.scrollWidth <= window.innerWidth);

const ruleNames = async () => (await server.graphql('{ earningRules { name earnPoint } }')).data.earningRules as Array<{ name: string; earnPoint: number }>;

describe('the console\'s settings, webhooks, program page and downloads', () => {
  it('a program manager edits a rule: the userError shows beside its field, then the rule saves; hostile names stay text', async () => {
    const created = await server.graphql(`mutation($name: String!) { earningRuleCreate(input: { type: sign_up, name: $name, earnPoint: 10 }) { userErrors { code } } }`, { name: HOSTILE });
    expect(created.data.earningRuleCreate.userErrors).toEqual([]);
    const { page, screenshot } = await joined('pm@console.test', 'program_manager');
    await page.getByRole('link', { name: 'Settings' }).click();
    await page.getByRole('heading', { name: 'Earning rules' }).waitFor();
    await expect.poll(() => page.locator('#rules tbody').textContent(), PAGE).toContain(HOSTILE);
    expect(await page.locator('#rewards tbody').textContent()).toContain(HOSTILE);
    expect(await page.locator('#settings img').count()).toBe(0);
    expect(await page.evaluate(() => (window as unknown as { __xss?: number }).__xss)).toBeUndefined();

    await page.getByRole('button', { name: `Edit the rule ${HOSTILE}` }).click();
    expect(await page.locator('#rule-name').inputValue()).toBe(HOSTILE);
    // A sign-up rule has no amount spent: the server's userError, beside that field.
    await page.getByLabel('Per amount spent (orders)').fill('5.00');
    await page.getByRole('button', { name: 'Save the rule' }).click();
    const error = page.locator('#rule-spent-error');
    await error.waitFor();
    expect(await error.textContent()).toMatch(/\S/);
    expect(await page.locator('#rule-spent').getAttribute('aria-describedby')).toBe('rule-spent-error');
    expect(await page.evaluate(() => document.activeElement?.id)).toBe('rule-spent');
    expect((await ruleNames()).map((r) => r.name)).toContain(HOSTILE);

    await page.getByLabel('Per amount spent (orders)').fill('');
    await page.locator('#rule-name').fill('Welcome bonus');
    await page.getByLabel('Earns points').fill('25');
    await page.getByRole('button', { name: 'Save the rule' }).click();
    await expect.poll(() => page.locator('#rules tbody').textContent(), PAGE).toContain('Welcome bonus');
    expect(await page.locator('#rule-spent-error').count()).toBe(0);
    expect(await ruleNames()).toContainEqual({ name: 'Welcome bonus', earnPoint: 25 });
    expect(await fitsWidth(page)).toBe(true);
    await screenshot('console-settings-1280.png');
  });

  it('support sees the settings, and the server refuses their save: its message is shown, nothing changes', async () => {
    const { page, expectProblems } = await joined('support-settings@console.test', 'support');
    await page.goto(`${server.url}/admin#/settings`);
    await page.getByRole('heading', { name: 'Program settings', exact: true }).waitFor();
    const before = (await server.graphql('{ shop { settings { pendingDays } } }')).data.shop.settings.pendingDays;
    await page.getByLabel('Pending days').fill(String(before + 7));
    await page.getByRole('button', { name: 'Save the settings' }).click();
    await expect.poll(() => page.locator('#message').textContent(), PAGE).toMatch(/support.*may not run.*shopSettingsUpdate/);
    expectProblems(/403/);
    expect((await server.graphql('{ shop { settings { pendingDays } } }')).data.shop.settings.pendingDays).toBe(before);
  });

  it('a program manager subscribes a webhook, sees its delivery and replays it', async () => {
    const { page, screenshot } = await joined('pm-hooks@console.test', 'program_manager');
    await page.getByRole('link', { name: 'Webhooks' }).click();
    await page.getByLabel('Topic').selectOption('points/added');
    await page.getByLabel('Callback URL (https)').fill(receiver.url);
    await page.getByRole('button', { name: 'Subscribe' }).click();
    await expect.poll(() => page.locator('#signing-secret-value').textContent(), PAGE).toMatch(/^[0-9a-f]{64}$/);
    await expect.poll(() => page.locator('#subscriptions tbody').textContent(), PAGE).toContain(receiver.url);

    const added = await server.graphql('mutation { pointsAdd(input: { customerIdentifier: "con-1", amount: 1, note: "webhook test" }) { userErrors { code } } }');
    expect(added.data.pointsAdd.userErrors).toEqual([]);
    const [first] = await receiver.waitFor(1, 30_000);
    // Recorded as delivered once the worker has the answer (the API asked, not the page: its refreshes are rate-limited like any call).
    await expect.poll(async () => (await server.graphql('{ webhookDeliveries(first: 1) { edges { node { status } } } }')).data.webhookDeliveries.edges[0]?.node.status, { timeout: 30_000, interval: 1000 })
      .toBe('succeeded');
    await page.getByRole('button', { name: 'Refresh the deliveries' }).click();
    await expect.poll(() => page.locator('#deliveries tbody').textContent(), PAGE).toContain('succeeded');
    expect(await page.locator('#deliveries tbody').textContent()).toContain('HTTP 204');
    await page.getByRole('button', { name: /^Replay the points\/added delivery/ }).first().click();
    await expect.poll(() => page.locator('#message').textContent(), PAGE).toContain('queued again');
    const [, again] = await receiver.waitFor(2, 30_000);
    expect(again!.headers['webhook-id']).toBe(first!.headers['webhook-id']);
    expect(await fitsWidth(page)).toBe(true);
    await screenshot('console-webhooks.png');
  });

  it('a viewer opens the program page with their session, its live events included, and downloads the exports; without a session they are refused', async () => {
    const { page, expectProblems } = await joined('viewer-downloads@console.test', 'viewer');
    const [download] = await Promise.all([page.waitForEvent('download'), page.getByRole('link', { name: 'Every customer' }).click()]);
    const customers = await readFile((await download.path())!, 'utf8');
    expect(customers).toContain('con-1@example.com');
    const [ledgerDownload] = await Promise.all([page.waitForEvent('download'), page.getByRole('link', { name: 'The ledger of those days' }).click()]);
    expect(await readFile((await ledgerDownload.path())!, 'utf8')).toContain('con-1@example.com');
    // No session, no file; and the cookie opens only the downloads, not the rest of REST.
    expect((await fetch(`${server.url}/rest-api/v1/exports/customers.csv`)).status).toBe(401);
    const other = await page.evaluate(async () => (await fetch('/rest-api/v1/pointsRedemptions')).status);
    expectProblems(/401/);
    expect(other).toBe(401);

    // The page's graphql-ws connection opens with the session's cookie, no key typed.
    await page.getByRole('link', { name: 'Program page' }).click();
    await expect.poll(() => page.locator('#status').textContent(), PAGE).toBe('live, signed in as viewer-downloads@console.test');
    await expect.poll(() => page.locator('#activity tbody').textContent(), { timeout: 15_000 }).toContain('con-1@example.com');
    expect(await page.locator('#kpi-members').textContent()).toMatch(/^\d/);
    expect(await page.locator('#events-panel').isVisible()).toBe(true);
    await expect.poll(liveSubscriptions, PAGE).toBe(1);
    const res = await server.request('POST', '/rest-api/v1/points/add', { customerIdentifier: 'con-2', amount: 7 });
    expect(res.status).toBe(200);
    const { activity } = await res.json();
    const shown = page.locator('#events li[data-type="points/added"]');
    await expect.poll(() => shown.count(), PAGE).toBe(1);
    expect(await shown.locator('.meta .type').textContent()).toBe('points/added');
    expect(await shown.locator('pre').textContent()).toContain(activity._id);
    expect(await page.locator('#count-total').textContent()).toBe('1');
  });

  it('a tier is made from the keyboard alone, and the settings and webhooks fit a phone', async () => {
    const { page, screenshot } = await joined('pm-phone@console.test', 'program_manager', { width: 390, height: 844 });
    await page.goto(`${server.url}/admin#/settings`);
    await page.getByRole('heading', { name: 'Tiers' }).waitFor();
    expect(await fitsWidth(page)).toBe(true);
    await page.locator('#tier-name').focus();
    await page.keyboard.type('Keyboard Silver');
    await page.keyboard.press('Tab');
    expect(await page.evaluate(() => document.activeElement?.id)).toBe('tier-threshold');
    // Above every customer here (the demo shop's too): a tier somebody holds cannot be deleted.
    await page.keyboard.type('50000');
    await page.keyboard.press('Tab');
    await page.keyboard.type('1.5');
    await page.keyboard.press('Enter');
    await expect.poll(() => page.locator('#tiers tbody').textContent(), PAGE).toContain('Keyboard Silver');
    expect(await page.locator('#message').textContent()).toBe('The tier is saved.');
    const tiers = (await server.graphql('{ tiers { name threshold multiplier } }')).data.tiers;
    expect(tiers).toContainEqual({ name: 'Keyboard Silver', threshold: '50000', multiplier: '1.5' });
    expect(await fitsWidth(page)).toBe(true);
    await screenshot('console-settings-phone.png');
    // Deleting asks first.
    page.once('dialog', (dialog) => dialog.accept());
    await page.getByRole('button', { name: 'Delete the tier Keyboard Silver' }).click();
    await expect.poll(() => page.locator('#message').textContent(), PAGE).toBe('The tier is deleted.');
    await expect.poll(() => page.locator('#tiers tbody').textContent(), PAGE).not.toContain('Keyboard Silver');
    expect((await server.graphql('{ tiers { name } }')).data.tiers).toEqual([{ name: 'Console Gold' }]);
    await page.goto(`${server.url}/admin#/webhooks`);
    await page.getByRole('heading', { name: 'Deliveries, newest first' }).waitFor();
    expect(await fitsWidth(page)).toBe(true);
  });
  it('a program manager saves the shop\'s other settings, each form its own; an unknown time zone and a tier metric in use show in place', async () => {
    const { page, screenshot } = await joined('pm-more@console.test', 'program_manager');
    await page.goto(`${server.url}/admin#/settings`);
    await page.getByRole('heading', { name: 'Currency, time zone and records' }).waitFor();
    const settings = async () => (await server.graphql(`{ shop { settings {
      timezone auditRetentionDays codeWarningDays returnPointsOnCodeExpiry returnCodePointsOnRefund tiers { metric window days } earnOnTestOrders rateLimitPerMinute
    } } }`)).data.shop.settings;
    const before = await settings();
    // The screen shows what the API holds.
    await expect.poll(() => page.locator('#set-timezone').inputValue(), PAGE).toBe(before.timezone);
    expect(await page.locator('#set-audit-retention').inputValue()).toBe(String(before.auditRetentionDays));
    expect(await page.locator('#set-rate-limit').inputValue()).toBe('10000');

    await page.getByLabel('Time zone (IANA, e.g. Europe/Paris)').fill('Mars/Olympus');
    await page.getByLabel('Audit log kept (days)').fill('30');
    await page.getByRole('button', { name: 'Save the shop settings' }).click();
    const error = page.locator('#set-timezone-error');
    await error.waitFor(PAGE);
    expect(await error.textContent()).toContain('IANA');
    expect(await page.locator('#set-timezone').getAttribute('aria-describedby')).toBe('set-timezone-error');
    expect(await page.evaluate(() => document.activeElement?.id)).toBe('set-timezone');
    // Refused whole: the retention typed beside it did not change either.
    expect(await settings()).toEqual(before);

    await page.getByLabel('Time zone (IANA, e.g. Europe/Paris)').fill('Europe/Paris');
    await page.getByRole('button', { name: 'Save the shop settings' }).click();
    await expect.poll(() => page.locator('#message').textContent(), PAGE).toBe('The settings are saved.');
    expect(await page.locator('#set-timezone-error').count()).toBe(0);
    await expect.poll(settings, PAGE).toMatchObject({ timezone: 'Europe/Paris', auditRetentionDays: 30, rateLimitPerMinute: 10000 });

    await page.getByLabel('Warn days before a code expires (0: never)').fill('3');
    await page.getByLabel('An expired code gives its points back').check();
    await page.getByLabel('A refunded order gives its codes\' points back').check();
    await page.getByRole('button', { name: 'Save the code settings' }).click();
    await expect.poll(settings, PAGE).toMatchObject({ codeWarningDays: 3, returnPointsOnCodeExpiry: true, returnCodePointsOnRefund: true });

    // The shop has tiers counting points: counting money instead is refused beside the metric.
    await page.getByLabel('Tiers count').selectOption('amount_spent');
    await page.getByLabel('Over', { exact: true }).selectOption('rolling_days');
    await page.getByLabel('Last days (rolling)').fill('90');
    await page.getByRole('button', { name: 'Save the tier qualification' }).click();
    await page.locator('#set-tier-metric-error').waitFor(PAGE);
    expect(await page.evaluate(() => document.activeElement?.id)).toBe('set-tier-metric');
    expect((await settings()).tiers).toEqual(before.tiers);
    await page.getByLabel('Tiers count').selectOption('points_earned');
    await page.getByRole('button', { name: 'Save the tier qualification' }).click();
    await expect.poll(async () => (await settings()).tiers, PAGE).toEqual({ metric: 'points_earned', window: 'rolling_days', days: 90 });
    await expect.poll(() => page.locator('#set-tier-window').inputValue(), PAGE).toBe('rolling_days');
    expect(await fitsWidth(page)).toBe(true);
    await screenshot('console-settings-more.png');
  });
});
