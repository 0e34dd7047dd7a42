// Search: finding a customer the way a shop's staff do, by the shop's customer id, a discount
// code or the start of an e-mail, fast whatever the number of customers.

export { CUSTOMER_MATCHES, type CustomerHit, type CustomerMatch, CUSTOMER_SEARCH_MAX, customerSearchSchema, searchCustomers } from './customer-search.js';
