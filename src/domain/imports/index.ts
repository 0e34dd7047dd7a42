// Imports: a shop's history brought in from files (customers, orders in ours or Shopify's shape,
// customers from other programs' exports), streamed in batches, each row taken or rejected with its reason.

export {
  DEFAULT_REPORT_LIMIT, importCustomers, type ImportRecord, type ImportRejection, type ImportResult, PARALLEL_BATCHES,
} from './customers-import.js';
export { importOrders, ORDER_IMPORT_POOL_SIZE, type OrdersImportResult } from './orders-import.js';
export { importPeerCustomers, PEER_SOURCES, type PeerImportResult, type PeerSource } from './peer-import.js';
