import { randomBytes } from 'node:crypto';
import { type Client, createClient } from 'graphql-ws';
import WebSocket from 'ws';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from './helpers.js';
import { collect, until, wsClient } from './live-helpers.js';
import { member, PASSWORD, type StaffClient, staffGraphql } from './staff-helpers.js';

// A person's live events (the program page opened from the console): graphql-ws with the session
// cookie instead of a key, from the server's own origin only, held for the shop the session is in,
// and closed when the session ends. Real sockets (ws, graphql-ws's client) against a real server.

const REDIS_URL = process.env.TEST_REDIS_URL;
let t: TestApp;
let a: { shopId: string; apiKey: string };
let b: { shopId: string; apiKey: string };
let ownerA: StaffClient;

beforeAll(async () => {
  t = await startTestApp(REDIS_URL ? { REDIS_URL, REDIS_KEY_PREFIX: `staff-live-${randomBytes(4).toString('hex')}:` } : {});
  a = await t.shop('Shop A');
  b = await t.shop('Shop B');
  await t.customer(a.shopId, 'a-1', 100);
  await t.customer(b.shopId, 'b-1', 100);
  ownerA = await member(t, a.shopId, 'owner-a@example.com', 'owner');
});
afterAll(() => t?.stop());

const EVENTS = `subscription($topics: [String!]!) { events(topics: $topics) { type shopId data } }`;
const ownOrigin = () => new URL(t.url).origin;

/** A graphql-ws client whose upgrade carries these headers (a browser's cookie and Origin), with no key in connectionParams. */
function socketWith(headers: Record<string, string>, closed: number[] = []): Client {
  class WithHeaders extends WebSocket {
    constructor(url: string, protocols?: string | string[]) {
      super(url, protocols, { headers });
    }
  }
  return createClient({
    url: `${t.url.replace(/^http/, 'ws')}/graphql`,
    webSocketImpl: WithHeaders,
    retryAttempts: 0,
    shouldRetry: () => false,
    on: { closed: (event) => void closed.push((event as { code: number }).code) },
  });
}

const addPoints = async (shop: { apiKey: string }, customerIdentifier: string, amount: number) => {
  const res = await t.post('/rest-api/v1/points/add', { customerIdentifier, amount }, shop.apiKey);
  expect(res.status).toBe(200);
};

/** Subscribes to every points event and waits until the server holds the subscription. */
async function pointsEvents(client: Client) {
  const before = t.app.bus.stats().listeners;
  const events = collect(client, EVENTS, { topics: ['points/*'] });
  await until(() => t.app.bus.stats().listeners > before || events.completed, 10_000, 'the subscription');
  return events;
}

describe('a person\'s live events over graphql-ws', () => {
  it('a viewer\'s session from the page\'s own origin receives the shop\'s events; an API key connects as before', async () => {
    const viewer = await member(t, a.shopId, 'viewer-a@example.com', 'viewer');
    const client = socketWith({ cookie: viewer.cookie, origin: ownOrigin() });
    const keyClient = wsClient(t.url, a.apiKey);
    try {
      const events = await pointsEvents(client);
      const keyEvents = await pointsEvents(keyClient);
      await addPoints(a, 'a-1', 3);
      await until(() => events.results.length === 1 && keyEvents.results.length === 1, 10_000, 'the event on both sockets');
      expect(events.results[0]!.data.events).toMatchObject({ type: 'points/added', shopId: a.shopId, data: { newPoints: 103 } });
      expect(keyEvents.results[0]!.data.events.type).toBe('points/added');
    } finally {
      await client.dispose();
      await keyClient.dispose();
    }
  });

  it('no cookie (and no key) is refused with 4403', async () => {
    const closed: number[] = [];
    const client = socketWith({ origin: ownOrigin() }, closed);
    const events = collect(client, EVENTS, { topics: ['points/*'] });
    await until(() => events.completed, 10_000, 'the refusal');
    expect(events.results).toEqual([]);
    expect(closed).toEqual([4403]);
    // A made-up session token is no better.
    const closed2: number[] = [];
    const made = socketWith({ cookie: `staff_session=ss_${'A'.repeat(43)}`, origin: ownOrigin() }, closed2);
    const refused = collect(made, EVENTS, { topics: ['points/*'] });
    await until(() => refused.completed, 10_000, 'the refusal');
    expect(closed2).toEqual([4403]);
  });

  it('a valid cookie from another site\'s page (cross-site WebSocket hijacking), or without an Origin, is refused', async () => {
    const upgrades: Array<Record<string, string>> = [
      { cookie: ownerA.cookie, origin: 'https://evil.example' },
      { cookie: ownerA.cookie, origin: `http://127.0.0.1.evil.example:${new URL(t.url).port}` },
      { cookie: ownerA.cookie, origin: 'null' },
      { cookie: ownerA.cookie },
    ];
    for (const headers of upgrades) {
      const closed: number[] = [];
      const client = socketWith(headers, closed);
      const events = collect(client, EVENTS, { topics: ['points/*'] });
      await until(() => events.completed, 10_000, 'the refusal');
      expect(events.results, headers.origin).toEqual([]);
      expect(closed, headers.origin).toEqual([4403]);
    }
    // The same cookie from the own origin is fine: the session was not what was refused.
    const client = socketWith({ cookie: ownerA.cookie, origin: ownOrigin() });
    try {
      const events = await pointsEvents(client);
      expect(events.completed).toBe(false);
    } finally {
      await client.dispose();
    }
  });

  it('signing out closes the open socket (4403), and the cookie opens no new one', async () => {
    const person = await member(t, a.shopId, 'leaving-soon@example.com', 'support');
    const closed: number[] = [];
    const client = socketWith({ cookie: person.cookie, origin: ownOrigin() }, closed);
    const events = await pointsEvents(client);
    const out = await fetch(`${t.url}/admin/session`, { method: 'DELETE', headers: { cookie: person.cookie } });
    expect(out.status).toBe(200);
    await until(() => closed.length > 0, 5_000, 'the socket closed');
    expect(closed).toEqual([4403]);
    expect(events.completed).toBe(true);
    // Nothing arrives after the end.
    await addPoints(a, 'a-1', 1);
    await new Promise((r) => setTimeout(r, 300));
    expect(events.results).toEqual([]);
    const again = socketWith({ cookie: person.cookie, origin: ownOrigin() });
    const refused = collect(again, EVENTS, { topics: ['points/*'] });
    await until(() => refused.completed, 10_000, 'the refusal');
    expect(refused.results).toEqual([]);
  });

  it('a password change and a removal close the person\'s sockets too', async () => {
    const changing = await member(t, a.shopId, 'changing@example.com', 'viewer');
    const other = await staffGraphql(t, changing, '{ shop { id } }'); // a second session of the same person, kept
    expect(other.status).toBe(200);
    const removed = await member(t, a.shopId, 'removed@example.com', 'viewer');
    const closedChanging: number[] = [];
    const closedRemoved: number[] = [];
    const socketChanging = socketWith({ cookie: changing.cookie, origin: ownOrigin() }, closedChanging);
    const socketRemoved = socketWith({ cookie: removed.cookie, origin: ownOrigin() }, closedRemoved);
    await pointsEvents(socketChanging);
    await pointsEvents(socketRemoved);

    // Their password changed from another session of theirs: every other session ends.
    const signedInElsewhere = await fetch(`${t.url}/admin/session`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ email: 'changing@example.com', password: PASSWORD }),
    });
    const elsewhere = { cookie: signedInElsewhere.headers.get('set-cookie')!.split(';')[0]!, csrf: (await signedInElsewhere.json()).csrfToken };
    const changed = await staffGraphql(t, elsewhere, `mutation { staffPasswordChange(input: { currentPassword: "${PASSWORD}", newPassword: "another long password" }) { changed } }`);
    expect(changed.body.data.staffPasswordChange.changed).toBe(true);
    const gone = await staffGraphql(t, ownerA, `mutation($input: StaffMemberInput!) { staffRemove(input: $input) { userErrors { code } } }`, {
      input: { staffId: removed.body.staff.id },
    });
    expect(gone.body.data.staffRemove.userErrors).toEqual([]);
    await until(() => closedChanging.length > 0 && closedRemoved.length > 0, 5_000, 'both sockets closed');
    expect([closedChanging, closedRemoved]).toEqual([[4403], [4403]]);
  });

  it('a member of shop A never receives shop B\'s events', async () => {
    const client = socketWith({ cookie: ownerA.cookie, origin: ownOrigin() });
    try {
      const events = await pointsEvents(client);
      await addPoints(b, 'b-1', 11);
      await addPoints(a, 'a-1', 2);
      await until(() => events.results.length >= 1, 10_000, 'shop A\'s event');
      await new Promise((r) => setTimeout(r, 300)); // shop B's would have come first
      expect(events.results.map((r) => r.data.events.shopId)).toEqual([a.shopId]);
      // Asking for another shop's customer by its id finds nothing in A.
      const other = collect(client, `subscription { customerPointsChanged(identifier: "b-1") { points } }`);
      await until(() => other.completed, 10_000, 'the refusal');
      expect(JSON.stringify(other.results.length ? other.results : other.failure)).toMatch(/not_found|not found/i);
    } finally {
      await client.dispose();
    }
  });

  it('over SSE a session opens no stream: a person\'s live events come over graphql-ws only', async () => {
    // Every socket above is closed, and with it its subscriptions.
    await until(() => t.app.bus.stats().subscriptions === 0, 5_000, 'the earlier subscriptions ended');
    const res = await fetch(`${t.url}/graphql`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'text/event-stream', cookie: ownerA.cookie, 'x-csrf-token': ownerA.csrf },
      body: JSON.stringify({ query: EVENTS, variables: { topics: ['points/*'] } }),
      signal: AbortSignal.timeout(10_000),
    });
    // The error, then the end of the stream: nothing stays open that the session's end would not close.
    expect(await res.text()).toMatch(/graphql-ws/);
    expect(t.app.bus.stats().subscriptions).toBe(0);
  });
});
