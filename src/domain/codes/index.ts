// Discount codes: each code a redemption issues and its life (issued, then used by an order,
// expired or cancelled, once), and the points it cost given back where the shop says so.

export { cancelDiscountCode, codeCancelSchema, type CodeCancelled, discountCodeParamSchema } from './code-cancel.js';
export { CODE_STATUSES, type CodeEnd, codeNotIssued, endCode, lockCode, returnCodePoints } from './code-states.js';
export { type CodeUse, discountCodeJson, lockCodesForOrders, markCodesUsed, useCodes } from './code-uses.js';
export { type DiscountCode, issueDiscountCode, listDiscountCodesOfCustomers, REDEMPTION_TYPES, type RedemptionType, toDiscountCode } from './discount-codes.js';
export { codeExpiry, codeWarnings } from './code-expiry.js';
