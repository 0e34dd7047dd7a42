import type { DB } from '../db/database.js';
import { upsertCustomer } from './customers.js';
import { changePoints } from './points.js';
import { createShop } from './shops.js';

const DEMO_CUSTOMERS = [
  { shopifyCustomerId: 'demo-1001', email: 'ada@example.com', birthday: '1990-12-10', points: 250 },
  { shopifyCustomerId: 'demo-1002', email: 'grace@example.com', birthday: null, points: 1200 },
  { shopifyCustomerId: 'demo-1003', email: 'linus@example.com', birthday: null, points: 0 },
];

/**
 * On an empty database, creates a demo shop with a few customers and returns its API key
 * (the only time it can be shown). Returns null when any shop exists already.
 */
export async function ensureDemoShop(db: DB): Promise<{ shopId: string; apiKey: string } | null> {
  const existing = await db.selectFrom('shops').select('id').limit(1).executeTakeFirst();
  if (existing) return null;
  const { shop, apiKey } = await createShop(db, 'Demo shop');
  for (const { points, ...customer } of DEMO_CUSTOMERS) {
    await upsertCustomer(db, shop.id, customer);
    if (points > 0) {
      await changePoints(db, shop.id, 'add', {
        customerIdentifier: customer.shopifyCustomerId,
        amount: points,
        description: 'Demo opening balance',
      });
    }
  }
  return { shopId: shop.id, apiKey };
}
