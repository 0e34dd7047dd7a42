import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { READABLE_ALPHABET } from '../src/domain/kernel/ids.js';
import { linkReferee, REFERRAL_CODE_LENGTH } from '../src/domain/rewards/referrals.js';
import { onPostgres, startTestApp, type TestApp } from './helpers.js';

let t: TestApp;
let shop: { shopId: string; apiKey: string };
let other: { shopId: string; apiKey: string };

beforeAll(async () => {
  t = await startTestApp();
  shop = await t.shop();
  other = await t.shop('Other shop');
});
afterAll(() => t?.stop());

const CODE = new RegExp(`^[${READABLE_ALPHABET}]{${REFERRAL_CODE_LENGTH}}$`);
const REFEREE_FIELDS = ['id', 'status', 'referralCode', 'birthday', 'shopifyCustomerId', 'points', 'email', 'latestActivity', 'createdAt', 'updatedAt'];
const ISO = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/;

const db = () => t.app.database.db;

function get(path: string, query: Record<string, string | number>, apiKey: string | null = shop.apiKey) {
  const qs = new URLSearchParams(Object.entries(query).map(([k, v]) => [k, String(v)]));
  return fetch(`${t.url}/rest-api/v1${path}?${qs}`, { headers: apiKey ? { authorization: `Bearer ${apiKey}` } : {} });
}

async function codeOf(customerIdentifier: string, apiKey = shop.apiKey): Promise<string> {
  return (await (await get('/referral', { customerIdentifier }, apiKey)).json()).data.referralCode;
}

const REGISTER = `mutation($input: ReferralRegisterInput!) {
  referralRegister(input: $input) {
    referee { id status referralCode birthday shopifyCustomerId points email latestActivity createdAt updatedAt }
    customer { _id shopifyCustomerId points }
    referrer { _id shopifyCustomerId points }
    userErrors { code field message }
  }
}`;

function register(referralCode: string, customer: Record<string, unknown>, apiKey = shop.apiKey) {
  return t.graphql(apiKey, REGISTER, { input: { referralCode, customer } });
}

async function events(type: string, shopId = shop.shopId) {
  return db().selectFrom('outbox_events').select('data').where('shop_id', '=', shopId).where('type', '=', type).orderBy('seq').execute();
}

async function ledgerOf(shopifyCustomerId: string, shopId = shop.shopId) {
  const customer = await db()
    .selectFrom('customers')
    .selectAll()
    .where('shop_id', '=', shopId)
    .where('shopify_customer_id', '=', shopifyCustomerId)
    .executeTakeFirstOrThrow();
  const entries = await db().selectFrom('activities').selectAll().where('customer_id', '=', customer.id).orderBy('seq').execute();
  return {
    entries,
    balance: customer.points,
    last: entries.at(-1)?.new_points ?? 0,
    sum: entries.reduce((s, e) => s + (e.new_points - e.old_points), 0),
    chained: entries.every((e, i) => i === 0 || e.old_points === entries[i - 1]!.new_points),
  };
}

describe('GraphQL referral codes', () => {
  const READ = 'query($id: String!) { customer(identifier: $id) { referralCode } }';
  const CREATE = `mutation($input: ReferralCodeCreateInput!) {
    referralCodeCreate(input: $input) { referralCode customer { shopifyCustomerId referralCode } userErrors { code field message } }
  }`;
  const createdFor = async (shopifyCustomerId: string) =>
    (await events('referrals/code_created')).filter((e) => (e.data as { shopifyCustomerId: string }).shopifyCustomerId === shopifyCustomerId);

  it('reads the code without creating one; referralCodeCreate creates it once and then returns it, as GET /referral does', async () => {
    await t.customer(shop.shopId, 'gql-code');
    expect((await t.graphql(shop.apiKey, READ, { id: 'gql-code' })).data.customer.referralCode).toBeNull();
    expect((await t.graphql(shop.apiKey, READ, { id: 'gql-code' })).data.customer.referralCode).toBeNull();
    expect(await createdFor('gql-code')).toHaveLength(0);

    const created = (await t.graphql(shop.apiKey, CREATE, { input: { customerIdentifier: 'gql-code' } })).data.referralCodeCreate;
    expect(created.referralCode).toMatch(CODE);
    expect(created).toEqual({ referralCode: created.referralCode, customer: { shopifyCustomerId: 'gql-code', referralCode: created.referralCode }, userErrors: [] });
    const again = (await t.graphql(shop.apiKey, CREATE, { input: { customerIdentifier: 'GQL-CODE@example.com' } })).data.referralCodeCreate;
    expect(again.referralCode).toBe(created.referralCode);
    expect(await codeOf('gql-code')).toBe(created.referralCode);
    expect((await t.graphql(shop.apiKey, READ, { id: 'gql-code' })).data.customer.referralCode).toBe(created.referralCode);
    expect(await createdFor('gql-code')).toHaveLength(1);
  });

  it('refuses an unknown or foreign customer and invalid input as userErrors', async () => {
    await t.customer(other.shopId, 'gql-foreign');
    for (const customerIdentifier of ['nobody', 'gql-foreign']) {
      const res = (await t.graphql(shop.apiKey, CREATE, { input: { customerIdentifier } })).data.referralCodeCreate;
      expect(res).toMatchObject({ referralCode: null, userErrors: [{ code: 'customer_not_found', field: ['input', 'customerIdentifier'] }] });
    }
    const blank = (await t.graphql(shop.apiKey, CREATE, { input: { customerIdentifier: '  ' } })).data.referralCodeCreate;
    expect(blank).toMatchObject({ referralCode: null, userErrors: [{ code: 'validation_error', field: ['input', 'customerIdentifier'] }] });
    expect(await createdFor('gql-foreign')).toHaveLength(0);
  });
});

describe('GET /referral', () => {
  it('creates the code on first request and returns the same one after, by id or e-mail', async () => {
    await t.customer(shop.shopId, 'ref-1');
    const res = await get('/referral', { customerIdentifier: 'ref-1' });
    expect(res.status).toBe(200);
    const body = await res.json();
    expect(Object.keys(body).sort()).toEqual(['data', 'message', 'success']);
    expect(body.success).toBe(true);
    expect(Object.keys(body.data)).toEqual(['referralCode']);
    expect(body.data.referralCode).toMatch(CODE);
    expect(await codeOf('ref-1')).toBe(body.data.referralCode);
    expect(await codeOf('REF-1@example.com')).toBe(body.data.referralCode);
    const created = (await events('referrals/code_created')).filter((e) => (e.data as { referralCode: string }).referralCode === body.data.referralCode);
    expect(created).toHaveLength(1);
    expect(created[0]!.data).toMatchObject({ shopifyCustomerId: 'ref-1', email: 'ref-1@example.com' });
  });

  it(`8 parallel first requests get one code (${onPostgres ? 'PostgreSQL' : 'PGlite'})`, async () => {
    await t.customer(shop.shopId, 'ref-race');
    const responses = await Promise.all(Array.from({ length: 8 }, () => get('/referral', { customerIdentifier: 'ref-race' })));
    expect(responses.map((r) => r.status)).toEqual(Array(8).fill(200));
    const codes = new Set(await Promise.all(responses.map(async (r) => (await r.json()).data.referralCode)));
    expect(codes.size).toBe(1);
    const rows = await db().selectFrom('referral_codes').innerJoin('customers', 'customers.id', 'referral_codes.customer_id').select('code').where('customers.shopify_customer_id', '=', 'ref-race').execute();
    expect(rows).toHaveLength(1);
    expect((await events('referrals/code_created')).filter((e) => (e.data as { shopifyCustomerId: string }).shopifyCustomerId === 'ref-race')).toHaveLength(1);
  });

  it('answers 400 without customerIdentifier, 404 for an unknown or foreign customer, 401 without a key', async () => {
    for (const query of [{}, { customerIdentifier: '' }, { customerIdentifier: '   ' }] as Array<Record<string, string>>) {
      const res = await get('/referral', query);
      expect(res.status).toBe(400);
      expect(await res.json()).toMatchObject({ success: false, statusCode: 400, error: 'validation_error' });
    }
    const unknown = await get('/referral', { customerIdentifier: 'nobody' });
    expect(unknown.status).toBe(404);
    expect(await unknown.json()).toMatchObject({ success: false, statusCode: 404, error: 'customer_not_found' });
    expect((await get('/referral', { customerIdentifier: 'ref-1' }, other.apiKey)).status).toBe(404);
    expect((await get('/referral', { customerIdentifier: 'ref-1' }, null)).status).toBe(401);
    expect((await t.post('/rest-api/v1/referral', {}, shop.apiKey)).status).toBe(405);
  });
});

describe('referralRegister and GET /referral/referee', () => {
  it('signs a new customer up: referee, events, and the contract record in the list', async () => {
    await t.customer(shop.shopId, 'alice', 10);
    const code = await codeOf('alice');
    // Codes are typed by people: any letter case works.
    const res = await register(code.toLowerCase(), { shopifyCustomerId: 'bob', email: 'bob@example.com', birthday: '1991-02-03' });
    expect(res.errors).toBeUndefined();
    const { referee, customer, referrer, userErrors } = res.data.referralRegister;
    expect(userErrors).toEqual([]);
    expect(referee).toMatchObject({ status: true, referralCode: code, birthday: '1991-02-03', shopifyCustomerId: 'bob', points: 0, email: 'bob@example.com' });
    expect(customer.shopifyCustomerId).toBe('bob');
    expect(referrer.shopifyCustomerId).toBe('alice');

    expect((await events('customers/created')).some((e) => (e.data as { shopifyCustomerId: string }).shopifyCustomerId === 'bob')).toBe(true);
    const refereeEvents = (await events('referrals/referee_created')).filter((e) => (e.data as { id: string }).id === referee.id);
    expect(refereeEvents).toHaveLength(1);
    expect(refereeEvents[0]!.data).toMatchObject({ customer: customer._id, referrer: referrer._id, referralCode: code });

    const list = await get('/referral/referee', { customerIdentifier: 'alice', page: 1, pageSize: 10 });
    expect(list.status).toBe(200);
    const body = await list.json();
    expect(Object.keys(body).sort()).toEqual(['data', 'message', 'success']);
    expect(body.data).toHaveLength(1);
    const record = body.data[0];
    expect(Object.keys(record).sort()).toEqual([...REFEREE_FIELDS].sort());
    expect(record).toMatchObject({ id: referee.id, status: true, referralCode: code, birthday: '1991-02-03', shopifyCustomerId: 'bob', points: 0, email: 'bob@example.com' });
    for (const field of ['latestActivity', 'createdAt', 'updatedAt']) expect(record[field]).toMatch(ISO);
  });

  it('links an existing customer, and registering again with the same referrer changes nothing', async () => {
    await t.customer(shop.shopId, 'carol', 40);
    const code = await codeOf('alice');
    const first = await register(code, { shopifyCustomerId: 'carol', email: 'carol@example.com' });
    expect(first.data.referralRegister.userErrors).toEqual([]);
    expect(first.data.referralRegister.referee).toMatchObject({ shopifyCustomerId: 'carol', points: 40 });
    const again = await register(code, { shopifyCustomerId: 'carol', email: 'carol@example.com' });
    expect(again.data.referralRegister.userErrors).toEqual([]);
    expect(again.data.referralRegister.referee.id).toBe(first.data.referralRegister.referee.id);
    expect((await events('referrals/referee_created')).filter((e) => (e.data as { shopifyCustomerId: string }).shopifyCustomerId === 'carol')).toHaveLength(1);
    // latestActivity is the referee's newest ledger entry.
    const ledger = await ledgerOf('carol');
    expect(first.data.referralRegister.referee.latestActivity).toBe(ledger.entries.at(-1)!.created_at.toISOString());
  });

  it('refuses self-referral, an unknown code, a second referrer and bad input', async () => {
    const alice = await codeOf('alice');
    await t.customer(shop.shopId, 'dave');
    const dave = await codeOf('dave');

    const self = await register(alice, { shopifyCustomerId: 'alice', email: 'alice@example.com' });
    expect(self.data.referralRegister).toMatchObject({ referee: null, userErrors: [{ code: 'self_referral', field: ['input', 'referralCode'] }] });
    const unknown = await register('ZZZZ2222', { shopifyCustomerId: 'erin', email: 'erin@example.com' });
    expect(unknown.data.referralRegister.userErrors[0]).toMatchObject({ code: 'referral_code_not_found', field: ['input', 'referralCode'] });
    // The refused sign-up created nobody.
    expect(await db().selectFrom('customers').select('id').where('shopify_customer_id', '=', 'erin').executeTakeFirst()).toBeUndefined();
    const second = await register(dave, { shopifyCustomerId: 'bob', email: 'bob@example.com' });
    expect(second.data.referralRegister.userErrors[0]).toMatchObject({ code: 'already_referred', field: ['input', 'customer'] });
    // Another shop's code is unknown here.
    await t.customer(other.shopId, 'outsider');
    const foreign = await register(await codeOf('outsider', other.apiKey), { shopifyCustomerId: 'frank', email: 'frank@example.com' });
    expect(foreign.data.referralRegister.userErrors[0].code).toBe('referral_code_not_found');
    // The e-mail of another customer is a conflict, as in customerUpsert.
    const taken = await register(dave, { shopifyCustomerId: 'gina', email: 'bob@example.com' });
    expect(taken.data.referralRegister.userErrors[0].code).toBe('email_taken');

    for (const [customer, field] of [
      [{ shopifyCustomerId: 'h', email: 'not-an-email' }, 'email'],
      [{ shopifyCustomerId: '', email: 'h@example.com' }, 'shopifyCustomerId'],
      [{ shopifyCustomerId: 'h', email: 'h@example.com', birthday: '12/10/1990' }, 'birthday'],
    ] as const) {
      const bad = await register(dave, customer);
      expect(bad.data.referralRegister).toMatchObject({ referee: null, userErrors: [{ code: 'validation_error', field: ['input', 'customer', field] }] });
    }
    const emptyCode = await register(' ', { shopifyCustomerId: 'h', email: 'h@example.com' });
    expect(emptyCode.data.referralRegister.userErrors).toMatchObject([{ code: 'validation_error', field: ['input', 'referralCode'] }]);
  });

  it('grants the shop\'s referral rewards in the same transaction', async () => {
    const SETTINGS = `mutation($input: ShopReferralSettingsInput!) {
      shopReferralSettingsUpdate(input: $input) { referralSettings { referrerPoints refereePoints } userErrors { code } }
    }`;
    const set = await t.graphql(shop.apiKey, SETTINGS, { input: { referrerPoints: 50, refereePoints: 20 } });
    expect(set.data.shopReferralSettingsUpdate).toEqual({ referralSettings: { referrerPoints: 50, refereePoints: 20 }, userErrors: [] });
    const partial = await t.graphql(shop.apiKey, SETTINGS, { input: { refereePoints: 25 } });
    expect(partial.data.shopReferralSettingsUpdate.referralSettings).toEqual({ referrerPoints: 50, refereePoints: 25 });
    const negative = await t.graphql(shop.apiKey, SETTINGS, { input: { referrerPoints: -1 } });
    expect(negative.data.shopReferralSettingsUpdate).toEqual({ referralSettings: null, userErrors: [{ code: 'validation_error' }] });
    const read = await t.graphql(shop.apiKey, '{ shopReferralSettings { referrerPoints refereePoints } }');
    expect(read.data.shopReferralSettings).toEqual({ referrerPoints: 50, refereePoints: 25 });

    await t.customer(shop.shopId, 'rewarder', 100);
    const res = await register(await codeOf('rewarder'), { shopifyCustomerId: 'rewarded', email: 'rewarded@example.com' });
    expect(res.data.referralRegister.referee.points).toBe(25);
    expect(res.data.referralRegister.referrer.points).toBe(150);
    const referrer = await ledgerOf('rewarder');
    expect(referrer.entries.at(-1)).toMatchObject({ type: 'referral_reward', setting_type: 'referral', old_points: 100, new_points: 150 });
    const referee = await ledgerOf('rewarded');
    expect(referee.entries).toHaveLength(1);
    expect(referee.entries[0]).toMatchObject({ type: 'referral_reward', setting_type: 'referral', old_points: 0, new_points: 25 });
    const added = (await events('points/added')).map((e) => (e.data as { _id: string })._id);
    expect(added).toContain(referrer.entries.at(-1)!.id);
    expect(added).toContain(referee.entries[0]!.id);

    // A refused registration grants nothing.
    await register(await codeOf('rewarder'), { shopifyCustomerId: 'rewarder', email: 'rewarder@example.com' });
    expect((await ledgerOf('rewarder')).balance).toBe(150);
    await t.graphql(shop.apiKey, SETTINGS, { input: { referrerPoints: 0, refereePoints: 0 } });
  });

  it(`10 parallel sign-ups with one referrer's code: each rewarded once, ledger consistent (${onPostgres ? 'PostgreSQL' : 'PGlite'})`, async () => {
    const s = await t.shop('Race shop');
    await t.graphql(s.apiKey, 'mutation { shopReferralSettingsUpdate(input: { referrerPoints: 10, refereePoints: 5 }) { userErrors { code } } }');
    await t.customer(s.shopId, 'hub', 7);
    const code = await codeOf('hub', s.apiKey);
    const results = await Promise.all(
      Array.from({ length: 10 }, (_, i) => register(code, { shopifyCustomerId: `spoke-${i}`, email: `spoke-${i}@example.com` }, s.apiKey)),
    );
    expect(results.every((r) => r.data.referralRegister.userErrors.length === 0)).toBe(true);
    const hub = await ledgerOf('hub', s.shopId);
    expect(hub.balance).toBe(107);
    expect(hub.last).toBe(107);
    expect(hub.sum).toBe(107);
    expect(hub.chained).toBe(true);
    expect(hub.entries.filter((e) => e.type === 'referral_reward')).toHaveLength(10);
    for (let i = 0; i < 10; i++) expect((await ledgerOf(`spoke-${i}`, s.shopId)).balance).toBe(5);
  });

  it('pages referees in sign-up order; past the end is an empty list', async () => {
    await t.customer(shop.shopId, 'pager');
    const code = await codeOf('pager');
    for (let i = 0; i < 5; i++) await register(code, { shopifyCustomerId: `pg-${i}`, email: `pg-${i}@example.com` });
    const ids = async (page: number, pageSize: number) =>
      (await (await get('/referral/referee', { customerIdentifier: 'pager', page, pageSize })).json()).data.map((r: { shopifyCustomerId: string }) => r.shopifyCustomerId);
    expect(await ids(1, 2)).toEqual(['pg-0', 'pg-1']);
    expect(await ids(2, 2)).toEqual(['pg-2', 'pg-3']);
    expect(await ids(3, 2)).toEqual(['pg-4']);
    expect(await ids(4, 2)).toEqual([]);
    expect(await ids(1, 250)).toHaveLength(5);
    // A customer who referred nobody has an empty list.
    const nobody = await get('/referral/referee', { customerIdentifier: 'dave', page: 1, pageSize: 10 });
    expect(await nobody.json()).toMatchObject({ success: true, data: [] });

    const Q = `query($after: String) { customer(identifier: "pager") { referralCode referees(first: 3, after: $after) {
      edges { node { shopifyCustomerId referralCode } } pageInfo { hasNextPage endCursor } } } }`;
    const first = (await t.graphql(shop.apiKey, Q, {})).data.customer;
    expect(first.referralCode).toBe(code);
    expect(first.referees.edges.map((e: { node: { shopifyCustomerId: string } }) => e.node.shopifyCustomerId)).toEqual(['pg-0', 'pg-1', 'pg-2']);
    expect(first.referees.pageInfo.hasNextPage).toBe(true);
    const rest = (await t.graphql(shop.apiKey, Q, { after: first.referees.pageInfo.endCursor })).data.customer.referees;
    expect(rest.edges.map((e: { node: { shopifyCustomerId: string } }) => e.node.shopifyCustomerId)).toEqual(['pg-3', 'pg-4']);
    expect(rest.pageInfo.hasNextPage).toBe(false);
  });

  const badQueries: Array<[string, Record<string, string | number>]> = [
    ['missing customerIdentifier', { page: 1, pageSize: 10 }],
    ['missing page', { customerIdentifier: 'pager', pageSize: 10 }],
    ['missing pageSize', { customerIdentifier: 'pager', page: 1 }],
    ['page 0', { customerIdentifier: 'pager', page: 0, pageSize: 10 }],
    ['pageSize 251', { customerIdentifier: 'pager', page: 1, pageSize: 251 }],
    ['pageSize 0', { customerIdentifier: 'pager', page: 1, pageSize: 0 }],
    ['fractional pageSize', { customerIdentifier: 'pager', page: 1, pageSize: '2.5' }],
    ['word page', { customerIdentifier: 'pager', page: 'first', pageSize: 10 }],
  ];
  it.each(badQueries)('GET /referral/referee answers %s with 400', async (_name, query) => {
    const res = await get('/referral/referee', query);
    expect(res.status).toBe(400);
    expect(await res.json()).toMatchObject({ success: false, statusCode: 400, error: 'validation_error' });
  });

  it('GET /referral/referee answers 404 for an unknown or foreign referrer, 401 without a key', async () => {
    expect((await get('/referral/referee', { customerIdentifier: 'nobody', page: 1, pageSize: 10 })).status).toBe(404);
    expect((await get('/referral/referee', { customerIdentifier: 'pager', page: 1, pageSize: 10 }, other.apiKey)).status).toBe(404);
    expect((await get('/referral/referee', { customerIdentifier: 'pager', page: 1, pageSize: 10 }, null)).status).toBe(401);
  });
});

describe('linkReferee (the customers import\'s referredBy)', () => {
  it('links by referral code or by the referrer\'s id or e-mail, and refuses what registerReferral refuses', async () => {
    for (const id of ['imp-ref', 'imp-a', 'imp-b', 'imp-c']) await t.customer(shop.shopId, id);
    const code = await codeOf('imp-ref');
    const byCode = await linkReferee(db(), shop.shopId, 'imp-a', code.toLowerCase());
    expect(byCode).toMatchObject({ created: true, referee: { shopifyCustomerId: 'imp-a', referralCode: code } });
    const byId = await linkReferee(db(), shop.shopId, 'imp-b', 'imp-ref');
    expect(byId.referee.referralCode).toBe(code);
    const byEmail = await linkReferee(db(), shop.shopId, 'imp-c', 'IMP-REF@example.com');
    expect(byEmail.referee.referralCode).toBe(code);
    // Importing the same file again is a no-op.
    expect((await linkReferee(db(), shop.shopId, 'imp-a', 'imp-ref')).created).toBe(false);

    await expect(linkReferee(db(), shop.shopId, 'imp-a', 'imp-b')).rejects.toMatchObject({ code: 'already_referred' });
    await expect(linkReferee(db(), shop.shopId, 'imp-ref', 'imp-ref')).rejects.toMatchObject({ code: 'self_referral' });
    await expect(linkReferee(db(), shop.shopId, 'imp-ref', 'nobody')).rejects.toMatchObject({ code: 'referrer_not_found' });
    // A referrer without a code gets one, as on first GET /referral.
    await t.customer(shop.shopId, 'imp-fresh');
    await t.customer(shop.shopId, 'imp-d');
    const fresh = await linkReferee(db(), shop.shopId, 'imp-d', 'imp-fresh');
    expect(fresh.referee.referralCode).toBe(await codeOf('imp-fresh'));
  });
});
