import type { DB } from './db/database.js';
import { changePoints } from './domain/ledger/index.js';
import { upsertCustomer } from './domain/program/index.js';
import { createPointsRedemption, linkReferee } from './domain/rewards/index.js';
import { createShop } from './domain/shops/index.js';
import { createStaffInvite, type StaffLink } from './domain/staff/index.js';

/** The demo shop's name: later starts find it by this to say how to make it a new key. */
export const DEMO_SHOP_NAME = 'Demo shop';
/** Who the demo shop's owner invite is for: they sign in to the staff console with it. */
export const DEMO_OWNER_EMAIL = 'owner@example.com';

const DEMO_CUSTOMERS = [
  { shopifyCustomerId: 'demo-1001', email: 'ada@example.com', birthday: '1990-12-10', points: 250 },
  { shopifyCustomerId: 'demo-1002', email: 'grace@example.com', birthday: null, points: 1200 },
  { shopifyCustomerId: 'demo-1003', email: 'linus@example.com', birthday: null, points: 0 },
];

const DEMO_REDEMPTIONS = [
  { name: '$5 off', type: 'amount', discountPrefix: 'LOYAL5-', rewardValue: 500, discountValue: 5 },
  { name: '$1 off per 100 points', type: 'amount', exchangeType: 'variable', discountPrefix: 'LOYAL-', rewardValue: 100, discountValue: 1 },
  { name: '10% off', type: 'percentage', discountPrefix: 'TEN-', rewardValue: 800, discountValue: 10, expireDateType: 'days', expireDays: 30 },
  { name: 'Free shipping', type: 'shipping', discountPrefix: 'SHIP-', rewardValue: 300 },
  { name: 'Free tote bag', type: 'free_product', discountPrefix: 'TOTE-', rewardValue: 1000, applyProductOption: 'products', applyVariants: ['demo-variant-tote'] },
];

/**
 * On an empty database, creates a demo shop with a few customers, redemption options and a
 * referral, and returns its API key and a one-time owner invite for the staff console (the only
 * time either can be shown). Returns null when any shop exists already.
 */
export async function ensureDemoShop(db: DB): Promise<{ shopId: string; apiKey: string; ownerInvite: StaffLink } | null> {
  const existing = await db.selectFrom('shops').select('id').limit(1).executeTakeFirst();
  if (existing) return null;
  const { shop, apiKey } = await createShop(db, DEMO_SHOP_NAME);
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
  for (const option of DEMO_REDEMPTIONS) await createPointsRedemption(db, shop.id, option);
  // Ada referred Linus.
  await linkReferee(db, shop.id, 'demo-1003', 'demo-1001');
  const ownerInvite = await createStaffInvite(db, shop.id, { email: DEMO_OWNER_EMAIL, role: 'owner' }, new Date());
  return { shopId: shop.id, apiKey, ownerInvite };
}
