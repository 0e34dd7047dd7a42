// Shopify: the connector's inbox of Shopify webhooks, checked, stored and applied as orders,
// refunds and customers; Shopify's payloads read losslessly.

export {
  ensureOrderCustomer, getShopifyConnection, listShopifyWebhooks, purgeProcessedShopifyWebhooks, receiveShopifyWebhook,
  retryShopifyWebhook, setShopifyConnection, SHOPIFY_INBOX_RETENTION_DAYS, type ShopifyConnection, shopifyInbox,
  type ShopifyWebhook,
} from './shopify-connector.js';
export { orderPut, parseShopifyJson, parseShopifyOrder, type ShopifyOrder } from './shopify-payloads.js';
