// A shop leaves (issue 37, item 5): everything of it out as one archive, then its deletion after a
// grace period, done in batches by the scheduler.

export { SHOP_TABLES } from './shop-tables.js';
export { writeShopArchive } from './shop-export.js';
export { cancelShopDeletion, requestShopDeletion, scheduleShopDeletion, type ShopDeletion, shopDeletion, shopDeletionOf } from './shop-deletion.js';
