// Customers: a shop's customers, how they are named and found, and the access tokens a storefront
// holds for one of them. Their points are the ledger's.

export {
  announceEndedTokens, authenticateCustomerToken, createCustomerAccessToken, type CustomerAccessToken, customerAccessTokenInputSchema,
  customerAccessTokensRevokeInputSchema, type CustomerTokenScope, endCustomerTokens, forgetCustomerTokens, isStorefrontOrigin, isTokenLive,
  purgeExpiredCustomerAccessTokens, revokeCustomerAccessTokens, type TokenHolder,
} from './customer-access-tokens.js';
export {
  type Customer, customerIdentifierSchema, customerInputSchema, type CustomerKey, customerNotFound,
  customerPageQuerySchema, customersByIds, findCustomer, getCustomer, listCustomers, lockCustomer, matchesIdentifier, parseIdentifier,
  prefixRange, saveCustomerIn, toCustomer, translateUniqueViolation,
} from './customers.js';
