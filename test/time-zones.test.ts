import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { onPostgres, startTestApp, type TestApp } from './helpers.js';

/**
 * Issue 31, item 2: a zone Intl knows and PostgreSQL does not (US/Pacific-New) made every write of
 * the shop fail in SQL. A shop holding one from before fails alone: test/due-work-failures.test.ts.
 */

const SETTINGS = 'mutation($input: ShopSettingsInput!) { shopSettingsUpdate(input: $input) { settings { timezone } userErrors { code field message } } }';

let t: TestApp;
beforeAll(async () => {
  t = await startTestApp({ WORKER: 'off' });
});
afterAll(() => t?.stop());

describe(`time zones PostgreSQL does not know (${onPostgres ? 'PostgreSQL' : 'PGlite'})`, () => {
  it('shopSettingsUpdate accepts only a zone both Intl and the database know, in the database\'s spelling', async () => {
    const shop = await t.shop('Zone shop');
    for (const zone of ['US/Pacific-New', 'Canada/East-Saskatchewan']) {
      const res = await t.graphql(shop.apiKey, SETTINGS, { input: { timezone: zone } });
      expect(res.data.shopSettingsUpdate).toMatchObject({ settings: null, userErrors: [{ code: 'validation_error', field: ['input', 'timezone'], message: expect.stringContaining('database') }] });
    }
    expect((await t.graphql(shop.apiKey, SETTINGS, { input: { timezone: 'Mars/Olympus' } })).data.shopSettingsUpdate.userErrors[0].code).toBe('validation_error');
    expect((await t.graphql(shop.apiKey, SETTINGS, { input: { timezone: 'america/regina' } })).data.shopSettingsUpdate).toEqual({ settings: { timezone: 'America/Regina' }, userErrors: [] });
    // The shop's writes go on: its days are computed in SQL with that zone.
    expect((await t.graphql(shop.apiKey, 'mutation { customerUpsert(input: { shopifyCustomerId: "z1", email: "z1@example.com" }) { created } }')).data.customerUpsert.created).toBe(true);
    const add = await t.post('/rest-api/v1/points/add', { customerIdentifier: 'z1', amount: 10 }, shop.apiKey);
    expect(add.status).toBe(200);
    expect((await t.graphql(shop.apiKey, '{ shop { settings { timezone } } }')).data.shop.settings.timezone).toBe('America/Regina');
  });
});
