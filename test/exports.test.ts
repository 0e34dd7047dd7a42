import { parse } from 'csv-parse/sync';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { csvField } from '../src/domain/exports/csv.js';
import { EXPORT_PAGE } from '../src/domain/exports/customers-export.js';
import { ledgerCsv } from '../src/domain/exports/ledger-export.js';
import { updateShopSettings } from '../src/domain/settings/shop-settings.js';
import { startTestApp, type TestApp } from './helpers.js';

const CUSTOMER_HEADER = 'id,merchant_id,email,birthday,points_approved,points_pending,tier,created_at';
const LEDGER_HEADER = 'id,created_at,customer_id,merchant_id,email,type,setting_type,points_change,old_points,new_points,description,internal_note';

// Text a spreadsheet would run, and text that needs RFC 4180 quoting, as a shop or its customers could write it.
const FORMULA_ID = '=HYPERLINK("http://evil.example","click, me")';
const NASTY = ['=1+1', '+SUM(A1)', '-2+3', '@cmd', '\tTAB', '\rCR', 'a "quoted", multi\r\nline'];

let t: TestApp;
let shop: { shopId: string; apiKey: string };
let other: { shopId: string; apiKey: string };

const get = (path: string, apiKey: string | null = shop.apiKey) =>
  fetch(`${t.url}/rest-api/v1${path}`, { headers: apiKey ? { authorization: `Bearer ${apiKey}` } : {} });

async function csv(path: string): Promise<{ text: string; rows: Array<Record<string, string>>; res: Response }> {
  const res = await get(path);
  expect(res.status, path).toBe(200);
  const text = await res.text();
  return { text, res, rows: parse(text, { columns: true, relax_column_count: false }) };
}

async function graphql(query: string, variables?: Record<string, unknown>) {
  const res = await t.graphql(shop.apiKey, query, variables);
  expect(res.errors).toBeUndefined();
  return res.data;
}

const addPoints = (apiKey: string, customerIdentifier: string, amount: number, extra: Record<string, unknown> = {}) =>
  t.post('/rest-api/v1/points/add', { customerIdentifier, amount, ...extra }, apiKey);

beforeAll(async () => {
  // The exports' own limit (10 a minute) raised: this file asks for more; the last test checks it as configured.
  t = await startTestApp({ WORKER: 'off', RATE_LIMIT_FIXED_MULTIPLIER: '100' });
  shop = await t.shop('Export shop');
  other = await t.shop('Other shop');
  // A tier at 100 points earned, and orders' points pending 10 days.
  await graphql('mutation { earningRuleCreate(input: { type: place_order, name: "1 pt per $1", earnPoint: 1, spent: "1.00" }) { userErrors { message } } }');
  expect((await graphql('mutation { tierCreate(input: { name: "Gold", threshold: "100" }) { userErrors { code } } }')).tierCreate.userErrors).toEqual([]);
  await updateShopSettings(t.app.database.db, shop.shopId, { pendingDays: 10 });

  const upsert = 'mutation($input: CustomerInput!) { customerUpsert(input: $input) { userErrors { code message } } }';
  for (const input of [
    { shopifyCustomerId: 'plain-1', email: 'Ada@Example.com', birthday: '1990-06-15' },
    { shopifyCustomerId: FORMULA_ID, email: 'formula@example.com' },
    { shopifyCustomerId: 'plain-2', email: '-minus@example.com' },
  ]) {
    expect((await graphql(upsert, { input })).customerUpsert.userErrors).toEqual([]);
  }
  expect((await addPoints(shop.apiKey, 'plain-1', 150, { description: 'welcome', note: 'vip' })).status).toBe(200);
  for (const [i, text] of NASTY.entries()) {
    expect((await addPoints(shop.apiKey, FORMULA_ID, i + 1, { description: text, note: text })).status).toBe(200);
  }
  const order = await fetch(`${t.url}/rest-api/v1/orders/o-1`, {
    method: 'PUT',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${shop.apiKey}` },
    body: JSON.stringify({ customerIdentifier: 'plain-2', currency: 'USD', subtotal: '42.00', total: '42.00', refunded: '0', status: 'paid', lineItems: [{ productId: 'p', quantity: 1, price: '42.00' }] }),
  });
  expect(order.status).toBeLessThan(300);

  // The other shop: a customer with the same e-mail and shop id, and entries of its own.
  await t.customer(other.shopId, 'plain-1', 999);
  await t.customer(other.shopId, 'only-other', 5);
}, 60_000);

afterAll(async () => {
  await t?.stop();
});

describe('GET /rest-api/v1/exports/customers.csv', () => {
  it('is an attachment of text/csv with every customer of the shop, its balances and tier as the API reports them', async () => {
    const { res, text, rows } = await csv('/exports/customers.csv');
    expect(res.headers.get('content-type')).toBe('text/csv; charset=utf-8');
    expect(res.headers.get('content-disposition')).toMatch(/^attachment; filename="customers-\d{4}-\d{2}-\d{2}\.csv"$/);
    expect(text.split('\r\n')[0]).toBe(CUSTOMER_HEADER);
    expect(text.endsWith('\r\n')).toBe(true);
    // E-mail order, lower-cased: "-minus" < "ada" < "formula".
    expect(rows.map((r) => r.merchant_id)).toEqual(['plain-2', 'plain-1', `'${FORMULA_ID}`]);

    const api = await graphql(`{ customers(first: 10) { edges { node { _id shopifyCustomerId email birthday points pendingPoints createdAt tier { tier { name } } } } } }`);
    const expected = api.customers.edges.map(({ node: c }: any) => ({
      id: c._id,
      merchant_id: c.shopifyCustomerId === FORMULA_ID ? `'${FORMULA_ID}` : c.shopifyCustomerId,
      email: c.email.startsWith('-') ? `'${c.email}` : c.email,
      birthday: c.birthday ?? '',
      points_approved: String(c.points),
      points_pending: String(c.pendingPoints),
      tier: c.tier?.tier.name ?? '',
      created_at: new Date(c.createdAt).toISOString(),
    }));
    expect(rows).toEqual(expected);
    // What the shop did shows: the balance, the birthday, the order's points pending, the tier reached.
    const ada = rows.find((r) => r.merchant_id === 'plain-1')!;
    expect(ada).toMatchObject({ email: 'Ada@Example.com', birthday: '1990-06-15', points_approved: '150', points_pending: '0', tier: 'Gold' });
    expect(rows.find((r) => r.merchant_id === 'plain-2')).toMatchObject({ points_approved: '0', points_pending: '42', tier: '' });
  });

  it('holds nothing of another shop', async () => {
    const { rows } = await csv('/exports/customers.csv');
    const otherIds = (await t.app.database.db.selectFrom('customers').select('id').where('shop_id', '=', other.shopId).execute()).map((r) => r.id);
    expect(otherIds).toHaveLength(2);
    expect(rows.filter((r) => otherIds.includes(r.id!))).toEqual([]);
    expect(rows.map((r) => r.points_approved)).not.toContain('999');
  });

  it('pages through more customers than a page holds, each once', async () => {
    const big = await t.shop('Many customers');
    const total = EXPORT_PAGE + 50;
    const ids = Array.from({ length: total }, (_, k) => `m${String(k).padStart(5, '0')}`);
    for (let i = 0; i < total; i += 1_000) {
      await t.app.database.db
        .insertInto('customers')
        .values(ids.slice(i, i + 1_000).map((id) => ({ id: `c_${big.shopId}_${id}`, shop_id: big.shopId, shopify_customer_id: id, email: `${id}@example.com` })))
        .execute();
    }
    const res = await get('/exports/customers.csv', big.apiKey);
    const rows: Array<Record<string, string>> = parse(await res.text(), { columns: true });
    expect(rows.map((r) => r.merchant_id)).toEqual(ids);
  });

  it('refuses a request without a valid API key in the REST error shape', async () => {
    for (const key of [null, 'lk_not_a_key']) {
      const res = await get('/exports/customers.csv', key);
      expect(res.status).toBe(401);
      expect(await res.json()).toMatchObject({ success: false, statusCode: 401, error: 'unauthorized' });
    }
  });
});

describe('GET /rest-api/v1/exports/ledger.csv', () => {
  it('gives the entries of the range, oldest first, text guarded and quoted so a spreadsheet shows it as written', async () => {
    const from = new Date(Date.now() - 3_600_000).toISOString();
    const to = new Date(Date.now() + 3_600_000).toISOString();
    const { res, text, rows } = await csv(`/exports/ledger.csv?from=${encodeURIComponent(from)}&to=${encodeURIComponent(to)}`);
    expect(res.headers.get('content-disposition')).toMatch(/^attachment; filename="ledger-\d{4}-\d{2}-\d{2}-\d{4}-\d{2}-\d{2}\.csv"$/);
    expect(text.split('\r\n')[0]).toBe(LEDGER_HEADER);

    const api = await graphql(`{ activities(first: 100) { edges { node { _id type settingType description note oldPoints newPoints createdAt holder { _id shopifyCustomerId email } } } } }`);
    const entries = api.activities.edges.map((e: any) => e.node).reverse();
    expect(rows.map((r) => r.id)).toEqual(entries.map((e: any) => e._id));
    const guard = (s: string | null) => (s === null ? '' : /^[=+\-@\t\r]/.test(s) ? `'${s}` : s);
    expect(rows).toEqual(
      entries.map((e: any) => ({
        id: e._id,
        created_at: new Date(e.createdAt).toISOString(),
        customer_id: e.holder._id,
        merchant_id: guard(e.holder.shopifyCustomerId),
        email: guard(e.holder.email),
        type: e.type,
        setting_type: e.settingType,
        points_change: String(e.newPoints - e.oldPoints),
        old_points: String(e.oldPoints),
        new_points: String(e.newPoints),
        description: guard(e.description),
        internal_note: guard(e.note),
      })),
    );
    // Each nasty text came back as written, behind its guard where it would have been a formula.
    const described = rows.filter((r) => r.merchant_id === `'${FORMULA_ID}`).map((r) => r.description);
    expect(described).toEqual(['\'=1+1', '\'+SUM(A1)', '\'-2+3', '\'@cmd', '\'\tTAB', '\'\rCR', 'a "quoted", multi\r\nline']);
    // Raw text: quotes doubled inside a quoted field, a formula's guard inside the quotes.
    expect(text).toContain('"a ""quoted"", multi\r\nline"');
    expect(text).toContain(`"'=HYPERLINK(""http://evil.example"",""click, me"")"`);
    // Numbers are ours: a negative one is not guarded (none here are negative; the rule is csvField's).
    expect(csvField(-20)).toBe('-20');
    expect(csvField('-20')).toBe('\'-20');
  });

  it('leaves out entries before `from` and at or after `to`, and every other shop\'s', async () => {
    const db = t.app.database.db;
    const all = await db.selectFrom('activities').select(['id', 'created_at']).where('shop_id', '=', shop.shopId).orderBy('seq').execute();
    expect(all.length).toBeGreaterThan(4);
    // A range from the second entry's time to the fourth's: the fourth is out (to is excluded).
    const from = all[1]!.created_at;
    const to = all[3]!.created_at;
    const expected = all.filter((a) => a.created_at >= from && a.created_at < to).map((a) => a.id);
    expect(expected.length).toBeGreaterThan(0);
    const { rows } = await csv(`/exports/ledger.csv?from=${encodeURIComponent(from.toISOString())}&to=${encodeURIComponent(to.toISOString())}`);
    expect(rows.map((r) => r.id)).toEqual(expected);

    // A day's range, as dates; the other shop's entries (made in the same minutes) are not there.
    const today = new Date().toISOString().slice(0, 10);
    const tomorrow = new Date(Date.now() + 86_400_000).toISOString().slice(0, 10);
    const day = await csv(`/exports/ledger.csv?from=${today}&to=${tomorrow}`);
    const otherEntries = await db.selectFrom('activities').select('id').where('shop_id', '=', other.shopId).execute();
    expect(otherEntries.length).toBeGreaterThan(0);
    expect(day.rows.map((r) => r.id)).toEqual(all.filter((a) => a.created_at.toISOString().startsWith(today)).map((a) => a.id));
    expect(day.rows.some((r) => otherEntries.some((o) => o.id === r.id))).toBe(false);

    // Pages of two entries give the same file as one page.
    const wide = { from: new Date(Date.now() - 3_600_000), to: new Date(Date.now() + 3_600_000) };
    const join = async (chunks: AsyncIterable<string>) => {
      let text = '';
      for await (const chunk of chunks) text += chunk;
      return text;
    };
    const paged = await join(ledgerCsv(db, shop.shopId, wide, 2));
    expect(paged).toBe(await join(ledgerCsv(db, shop.shopId, wide)));
    expect(parse(paged, { columns: true })).toHaveLength(all.length);

    // A range with nothing in it: the header alone.
    const empty = await csv('/exports/ledger.csv?from=2001-01-01&to=2001-01-02');
    expect(empty.text).toBe(`${LEDGER_HEADER}\r\n`);
  });

  it.each([
    ['no range', ''],
    ['no to', '?from=2026-01-01'],
    ['a date that is not one', '?from=2026-13-01&to=2026-12-01'],
    ['a date-time without its offset', '?from=2026-01-01T00:00:00&to=2026-12-01'],
    ['to before from', '?from=2026-12-01&to=2026-01-01'],
    ['to equal to from', '?from=2026-12-01&to=2026-12-01'],
    ['an unknown parameter', '?from=2026-01-01&to=2026-12-01&shop=x'],
    ['a parameter twice', '?from=2026-01-01&from=2026-02-01&to=2026-12-01'],
  ])('answers 400 validation_error for %s', async (_name, query) => {
    const res = await get(`/exports/ledger.csv${query}`);
    expect(res.status).toBe(400);
    expect(res.headers.get('content-type')).toContain('application/json');
    expect(await res.json()).toMatchObject({ success: false, statusCode: 400, error: 'validation_error' });
  });
});

describe('the exports\' rate limit', () => {
  it('is 10 a minute per shop, shared by the two files, in the REST error shape', async () => {
    const limited = await startTestApp({ WORKER: 'off' });
    try {
      const s = await limited.shop('Limited shop');
      const other = await limited.shop('Unlimited neighbour');
      const call = (path: string, key = s.apiKey) => fetch(`${limited.url}/rest-api/v1${path}`, { headers: { authorization: `Bearer ${key}` } });
      for (let i = 0; i < 10; i++) {
        const res = await call(i % 2 ? '/exports/customers.csv' : '/exports/ledger.csv?from=2026-01-01&to=2026-02-01');
        expect(res.status).toBe(200);
        expect(res.headers.get('ratelimit-limit')).toBe('10');
        await res.text();
      }
      const refused = await call('/exports/customers.csv');
      expect(refused.status).toBe(429);
      expect(refused.headers.get('retry-after')).toMatch(/^\d+$/);
      expect(await refused.json()).toMatchObject({ success: false, statusCode: 429, error: 'rate_limited' });
      // Another shop's bucket is its own.
      const neighbour = await call('/exports/customers.csv', other.apiKey);
      expect(neighbour.status).toBe(200);
      expect(await neighbour.text()).toBe(`${CUSTOMER_HEADER}\r\n`);
    } finally {
      await limited.stop();
    }
    // Its own app, migrated afresh: slow on a loaded machine.
  }, 120_000);
});
