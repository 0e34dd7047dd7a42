import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migrateTo, migrateToLatest } from '../src/db/migrate.js';
import { changePoints } from '../src/domain/ledger/points.js';
import { upsertCustomer } from '../src/domain/program/sign-up.js';
import { createShop } from '../src/domain/shops/shops.js';
import { onPostgres, openTestDatabase, startTestApp, type TestApp } from './helpers.js';

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

describe(`a zone stored before the check (${onPostgres ? 'PostgreSQL' : 'PGlite'})`, () => {
  it('the migration gives it the zone Intl resolves it to when the database knows that one, else UTC, and the shop writes again', async () => {
    const handle = await openTestDatabase();
    try {
      const { db } = handle;
      // openTestDatabase migrated it all: back to before the fix, as a database of the day before was.
      await migrateTo(db, '2026_11_27_017_tier_metric_refunds');
      const shops: Record<string, string> = {};
      for (const zone of ['US/Pacific-New', 'Canada/East-Saskatchewan', 'Europe/Paris']) {
        const { shop } = await createShop(db, zone);
        await sql`update shops set timezone = ${zone} where id = ${shop.id}`.execute(db);
        await upsertCustomer(db, shop.id, { shopifyCustomerId: 'c1', email: 'c1@example.com' });
        shops[zone] = shop.id;
      }
      // Such a zone refuses every write: the database computes the shop's days with it.
      await expect(changePoints(db, shops['US/Pacific-New']!, 'add', { customerIdentifier: 'c1', amount: 5 })).rejects.toThrow(/time zone/);
      expect(await migrateToLatest(db)).toContain('2026_11_27_019_known_time_zones');
      const zones = Object.fromEntries((await db.selectFrom('shops').select(['id', 'timezone']).execute()).map((r) => [r.id, r.timezone]));
      expect(zones[shops['US/Pacific-New']!]).toBe('America/Los_Angeles');
      expect(zones[shops['Canada/East-Saskatchewan']!]).toBe('America/Regina');
      expect(zones[shops['Europe/Paris']!]).toBe('Europe/Paris');
      for (const id of Object.values(shops)) {
        expect((await changePoints(db, id, 'add', { customerIdentifier: 'c1', amount: 5 })).activity.newPoints).toBe(5);
      }
    } finally {
      await handle.close();
    }
  });
});
