// The in-process cache of authenticated API keys (src/domain/shops/shops.ts): it saves a query per
// request, and must never let a revoked or wrong key through.
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { type DatabaseHandle, openDatabase } from '../src/db/database.js';
import { migrateToLatest } from '../src/db/migrate.js';
import { API_KEY_CACHE_TTL_MS, authenticateApiKey, createShop, revokeApiKey } from '../src/domain/shops/shops.js';
import { isolatedPostgresUrl, onPostgres } from './helpers.js';

let handle: DatabaseHandle;
let dropSchema: (() => Promise<void>) | undefined;

beforeAll(async () => {
  const pg = onPostgres ? await isolatedPostgresUrl() : undefined;
  dropSchema = pg?.drop;
  handle = await openDatabase({ url: pg?.url, dataDir: 'memory://' });
  await migrateToLatest(handle.db);
});
afterAll(async () => {
  await handle?.close();
  await dropSchema?.();
});
afterEach(() => {
  vi.useRealTimers();
});

/** Counts the queries `fn` sends, by watching the pool/driver through Kysely's executor. */
async function queriesDuring(fn: () => Promise<unknown>): Promise<number> {
  const executor = handle.db.getExecutor();
  const spy = vi.spyOn(executor, 'executeQuery');
  try {
    await fn();
    return spy.mock.calls.length;
  } finally {
    spy.mockRestore();
  }
}

describe('API key cache', () => {
  it('asks the database once for a key used again and again', async () => {
    const { shop, apiKey } = await createShop(handle.db, 'Cached');
    expect(await queriesDuring(() => authenticateApiKey(handle.db, apiKey))).toBe(1);
    expect(await queriesDuring(async () => {
      for (let i = 0; i < 5; i++) expect((await authenticateApiKey(handle.db, apiKey))?.shop.id).toBe(shop.id);
    })).toBe(0);
  });

  it('refuses a wrong secret with a cached key\'s prefix', async () => {
    const { apiKey } = await createShop(handle.db, 'Forged');
    expect(await authenticateApiKey(handle.db, apiKey)).not.toBeNull();
    const forged = `${apiKey.slice(0, -1)}${apiKey.endsWith('A') ? 'B' : 'A'}`;
    expect(await authenticateApiKey(handle.db, forged)).toBeNull();
  });

  it('stops trusting a key revoked in this process at once, even one being looked up meanwhile', async () => {
    const { shop, apiKey } = await createShop(handle.db, 'Revoked here');
    expect(await authenticateApiKey(handle.db, apiKey)).not.toBeNull();
    await revokeApiKey(handle.db, shop.id, apiKey);
    expect(await authenticateApiKey(handle.db, apiKey)).toBeNull();

    // A lookup that started before a revocation may answer with what it read, but is not cached.
    const other = await createShop(handle.db, 'Racing');
    const inFlight = authenticateApiKey(handle.db, other.apiKey);
    await revokeApiKey(handle.db, other.shop.id, other.apiKey);
    await inFlight;
    expect(await authenticateApiKey(handle.db, other.apiKey)).toBeNull();
  });

  it('forgets only the revoked key: another shop\'s cached key stays cached', async () => {
    const kept = await createShop(handle.db, 'Kept');
    const revoked = await createShop(handle.db, 'Revoking');
    expect(await queriesDuring(() => authenticateApiKey(handle.db, kept.apiKey))).toBe(1);
    expect(await authenticateApiKey(handle.db, revoked.apiKey)).not.toBeNull();
    await revokeApiKey(handle.db, revoked.shop.id, revoked.apiKey);
    // No query: still served from the cache, and still right.
    expect(await queriesDuring(async () => expect((await authenticateApiKey(handle.db, kept.apiKey))?.shop.id).toBe(kept.shop.id))).toBe(0);
    expect(await queriesDuring(async () => expect(await authenticateApiKey(handle.db, revoked.apiKey)).toBeNull())).toBe(1);
  });

  it('honours a revocation made by another process within the TTL', async () => {
    const { shop, apiKey } = await createShop(handle.db, 'Revoked elsewhere');
    expect(await authenticateApiKey(handle.db, apiKey)).not.toBeNull();
    // Another process (the CLI, another instance) writes the revocation straight to the table.
    await handle.db.updateTable('api_keys').set({ revoked_at: new Date() }).where('shop_id', '=', shop.id).execute();
    vi.useFakeTimers({ toFake: ['Date'] });
    vi.setSystemTime(Date.now() + API_KEY_CACHE_TTL_MS + 1);
    expect(await authenticateApiKey(handle.db, apiKey)).toBeNull();
  });
});
