// The in-process cache of customer access tokens' identities (src/domain/customers/customer-access-tokens.ts):
// it saves the storefront a statement per request, and must never let an ended, expired or wrong token
// through. Whatever ends tokens forgets them here at once and tells the other instances (the
// announcer the server wires to the event bus; test/customer-access-tokens.test.ts runs two instances).
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { type DatabaseHandle, openDatabase } from '../src/db/database.js';
import { migrateToLatest } from '../src/db/migrate.js';
import {
  announceEndedTokens, authenticateCustomerToken, createCustomerAccessToken, CUSTOMER_TOKEN_CACHE_TTL_MS, type CustomerTokenScope,
  revokeCustomerAccessTokens,
} from '../src/domain/customers/customer-access-tokens.js';
import { eraseCustomer } from '../src/domain/data-rights/index.js';
import { upsertCustomer } from '../src/domain/program/sign-up.js';
import { updateShopSettings } from '../src/domain/settings/index.js';
import { requestShopDeletion, shopDeletion } from '../src/domain/shop-exit/index.js';
import { createShop } from '../src/domain/shops/shops.js';
import { isolatedPostgresUrl, onPostgres } from './helpers.js';

let handle: DatabaseHandle;
let dropSchema: (() => Promise<void>) | undefined;
const announced: CustomerTokenScope[] = [];

beforeAll(async () => {
  const pg = onPostgres ? await isolatedPostgresUrl() : undefined;
  dropSchema = pg?.drop;
  handle = await openDatabase({ url: pg?.url, dataDir: 'memory://' });
  await migrateToLatest(handle.db);
  announceEndedTokens(handle.db, (scope) => announced.push(scope));
});
afterAll(async () => {
  await handle?.close();
  await dropSchema?.();
});
afterEach(() => {
  vi.useRealTimers();
  announced.length = 0;
});

/** Counts the queries `fn` sends, by watching the pool/driver through Kysely's executor. */
async function queriesDuring(fn: () => Promise<unknown>): Promise<number> {
  const spy = vi.spyOn(handle.db.getExecutor(), 'executeQuery');
  try {
    await fn();
    return spy.mock.calls.length;
  } finally {
    spy.mockRestore();
  }
}

/** A shop with customers of these shop ids, and a token for each (in their order). */
async function shopWithTokens(name: string, ...customers: string[]) {
  const { shop, apiKey } = await createShop(handle.db, name);
  const tokens: string[] = [];
  for (const id of customers) {
    await upsertCustomer(handle.db, shop.id, { shopifyCustomerId: id, email: `${id}@example.com` });
    tokens.push((await createCustomerAccessToken(handle.db, shop.id, { customerIdentifier: id })).accessToken);
  }
  return { shopId: shop.id, apiKey, tokens };
}

const authenticate = (token: string, now?: Date) => authenticateCustomerToken(handle.db, token, now);

describe('customer access token cache', () => {
  it('asks the database once for a token used again and again, and keeps no customer record', async () => {
    const { shopId, tokens: [ada] } = await shopWithTokens('Cached', 'ada');
    expect(await queriesDuring(() => authenticate(ada!))).toBe(1);
    expect(await queriesDuring(async () => {
      for (let i = 0; i < 5; i++) expect((await authenticate(ada!))?.holder.shopId).toBe(shopId);
    })).toBe(0);
    expect(Object.keys((await authenticate(ada!))!).sort()).toEqual(['holder', 'shop', 'storefrontOrigins']);
  });

  it('refuses a forged secret with a cached token\'s prefix, without asking the database', async () => {
    const { tokens: [ada] } = await shopWithTokens('Forged', 'ada');
    expect(await authenticate(ada!)).not.toBeNull();
    const forged = `${ada!.slice(0, -1)}${ada!.endsWith('a') ? 'b' : 'a'}`;
    expect(await queriesDuring(async () => expect(await authenticate(forged)).toBeNull())).toBe(0);
    expect(await authenticate(ada!)).not.toBeNull();
  });

  it('refuses a cached token once it has expired, checked at every request against its expires_at', async () => {
    const { shop } = await createShop(handle.db, 'Expiring');
    await upsertCustomer(handle.db, shop.id, { shopifyCustomerId: 'ada', email: 'ada@example.com' });
    const { accessToken, expiresAt } = await createCustomerAccessToken(handle.db, shop.id, { customerIdentifier: 'ada', expiresInSeconds: 60 });
    expect(await authenticate(accessToken)).not.toBeNull();
    expect(await queriesDuring(async () => {
      expect(await authenticate(accessToken, new Date(expiresAt.getTime() - 1))).not.toBeNull();
      expect(await authenticate(accessToken, expiresAt)).toBeNull();
    })).toBe(0);
  });

  it('stops trusting a token revoked in this process at once, even one being looked up meanwhile', async () => {
    const { shopId, tokens: [ada] } = await shopWithTokens('Revoked here', 'ada');
    const { customerId } = (await authenticate(ada!))!.holder;
    await revokeCustomerAccessTokens(handle.db, shopId, { customerIdentifier: 'ada' });
    expect(await authenticate(ada!)).toBeNull();
    expect(announced).toEqual([{ shopId, customerId }]);

    // A lookup that started before a revocation may answer with what it read, but is not cached.
    const racing = await shopWithTokens('Racing', 'cy');
    const inFlight = authenticate(racing.tokens[0]!);
    await revokeCustomerAccessTokens(handle.db, racing.shopId, { customerIdentifier: 'cy' });
    await inFlight;
    expect(await authenticate(racing.tokens[0]!)).toBeNull();
  });

  it('forgets only the ended customer\'s tokens: another customer\'s cached token stays cached', async () => {
    const { shopId, tokens: [kept, ended] } = await shopWithTokens('Kept', 'kept', 'ended');
    expect(await queriesDuring(() => authenticate(kept!))).toBe(1);
    expect(await authenticate(ended!)).not.toBeNull();
    await revokeCustomerAccessTokens(handle.db, shopId, { customerIdentifier: 'ended' });
    expect(await queriesDuring(async () => expect((await authenticate(kept!))?.holder.shopId).toBe(shopId))).toBe(0);
    expect(await queriesDuring(async () => expect(await authenticate(ended!)).toBeNull())).toBe(1);
  });

  it('stops trusting an erased customer\'s cached token at once', async () => {
    const { shopId, tokens: [ada] } = await shopWithTokens('Erased', 'ada');
    const { customerId } = (await authenticate(ada!))!.holder;
    await eraseCustomer(handle.db, shopId, { customerIdentifier: 'ada' });
    expect(await authenticate(ada!)).toBeNull();
    expect(announced).toEqual([{ shopId, customerId }]);
  });

  it('reads the storefront origins afresh once the shop changes them: its tokens are forgotten', async () => {
    const { shopId, tokens: [ada] } = await shopWithTokens('Origins', 'ada');
    expect((await authenticate(ada!))?.storefrontOrigins).toEqual([]);
    await updateShopSettings(handle.db, shopId, { storefrontOrigins: ['https://shop.example'] });
    expect(announced).toEqual([{ shopId }]);
    expect(await queriesDuring(async () => expect((await authenticate(ada!))?.storefrontOrigins).toEqual(['https://shop.example']))).toBe(1);
    // Other settings leave the tokens cached.
    await updateShopSettings(handle.db, shopId, { pendingDays: 3 });
    expect(await queriesDuring(() => authenticate(ada!))).toBe(0);
  });

  it('stops trusting a deleted shop\'s cached tokens as the deletion removes them', async () => {
    const { shopId, tokens: [ada, bob] } = await shopWithTokens('Leaving', 'ada', 'bob');
    expect(await authenticate(ada!)).not.toBeNull();
    expect(await authenticate(bob!)).not.toBeNull();
    await requestShopDeletion(handle.db, shopId, { reason: 'requested', graceDays: 0 });
    while ((await shopDeletion.runDue(handle.db, new Date(), 500)) > 0);
    expect(await authenticate(ada!)).toBeNull();
    expect(await authenticate(bob!)).toBeNull();
    expect(announced).toContainEqual({ shopId });
  });

  it('honours a change made where no one forgets it (by SQL) within the TTL', async () => {
    const { shopId, tokens: [ada] } = await shopWithTokens('Revoked by SQL', 'ada');
    expect(await authenticate(ada!)).not.toBeNull();
    await handle.db.updateTable('customer_access_tokens').set({ revoked_at: new Date() }).where('shop_id', '=', shopId).execute();
    expect(await authenticate(ada!)).not.toBeNull();
    vi.useFakeTimers({ toFake: ['Date'] });
    vi.setSystemTime(Date.now() + CUSTOMER_TOKEN_CACHE_TTL_MS + 1);
    expect(await authenticate(ada!)).toBeNull();
  });
});
