import type { Page } from 'playwright-core';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { type BrowserSession, openChromium } from './chromium.js';
import { type NpmServer, startNpm } from './npm-start.js';

// The staff console as a shop's people meet it: `npm start`, one-time invite links the owner's key
// asks for, a real Chromium per person. What a role may not do is refused by the server, whatever
// the page shows; every value a customer, an order or a rule can carry is shown as text.

let server: NpmServer;
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
  server = await startNpm();
  const setup = await server.graphql(
    `mutation($hostile: String!) {
      t: tierCreate(input: { name: "Console Gold", threshold: "100000", multiplier: "2" }) { userErrors { code } }
      r: pointsRedemptionCreate(input: { name: $hostile, type: amount, rewardValue: 50, discountValue: 5 }) { pointsRedemption { _id } userErrors { code } }
      c1: customerUpsert(input: { shopifyCustomerId: "con-1", email: "con-1@example.com" }) { userErrors { code } }
      c2: customerUpsert(input: { shopifyCustomerId: "con-2", email: "con-2@example.com" }) { userErrors { code } }
      p1: pointsAdd(input: { customerIdentifier: "con-1", amount: 300, description: $hostile, note: $hostile }) { userErrors { code } }
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
