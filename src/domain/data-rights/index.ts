// Data rights (issue 37): everything held on one customer, out as one document, and their erasure,
// which leaves a tombstone so the program's money still adds up.

export { type CustomerDataExport, customerDataInputSchema, exportCustomerData } from './customer-export.js';
export { type CustomerErased, eraseCustomer, tombstoneOf } from './customer-erasure.js';
export { answerShopifyCompliance, type ComplianceRequest, complianceRequestsQuerySchema, getComplianceRequest, listComplianceRequests } from './shopify-compliance.js';
