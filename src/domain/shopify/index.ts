// Shopify: the connector's inbox of Shopify webhooks, checked, stored and applied as orders,
// refunds and customers; and the Admin side: the connection, the queue of what we tell Shopify, and
// the history brought in by bulk operations.

export {
  type ComplianceAnswer, createShopifyInbox, ensureOrderCustomer, getShopifyConnection, SHOPIFY_TOPICS, listShopifyWebhooks, purgeProcessedShopifyWebhooks, receiveShopifyWebhook,
  retryShopifyWebhook, setShopifyConnection, SHOPIFY_INBOX_RETENTION_DAYS, type ShopifyConnection,
  type ShopifyWebhook,
} from './shopify-connector.js';
export { forgetShopifyCustomer } from './customer-redaction.js';
export { orderPut, parseShopifyJson, parseShopifyOrder, type ShopifyComplianceRequest, type ShopifyOrder } from './shopify-payloads.js';
export {
  adminConnectionInputSchema, type AdminConnectionView, type AdminCredentials, adminConnectionView, deleteAdminConnection, missingScopes,
  openAdminConnection, type OpenAdminConnection, parseAdminCredentials, recordWebhookRegistration, registeredWebhooks, renewAdminToken,
  REQUIRED_SCOPES, saveAdminConnection, storeDomainOf, type WebhookRegistration,
} from './admin-connection.js';
export { codesToSync, codeToSync, type CodeTermsRow, type CodeToSync, gid, percentFraction, shopifyDiscountOf, queueCodeSync, recordCodeRefused, recordCodeSynced, type ShopifyDiscount, unsyncCode } from './code-sync.js';
export { type BulkObject, customerFromBulk, orderFromBulk } from './bulk-payloads.js';
export {
  applyImportBatch, type BatchOutcome, beginShopifyImport, type BulkGroup, finishImportPhase, type ImportPhase, recordBulkOperation, recordBulkResult,
  recordImportError, restartImportPhase, type ShopifyImport, shopifyImportOf,
} from './history-import.js';
export {
  claimSyncJobs, enqueueSyncJobs, ensureSyncJob, failSyncJob, finishSyncJob, rescheduleSyncJob, returnSyncJob, shopsWithDueJobs, SYNC_KINDS, type SyncJob, type SyncKind, syncJobCounts,
} from './sync-jobs.js';
export {
  COLLECTIONS_RECONCILE_EVERY_MS, collectionsSyncState, knownCollections, legacyId, ORDER_WAITS_FOR_COLLECTIONS_MS, type ProductCollections, reconcilePosition,
  recordProductCollections, recordReconcilePage,
} from './product-collections.js';
