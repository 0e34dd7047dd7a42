// The kernel: what every capability shares and none owns: errors, ids, money, validation, pages,
// the outbox's event catalog, a shop's calendar, how due work is claimed and retried, and the
// per-process cache of who a credential speaks for.

export { nextDay, shopPeriods, startOfShopDay } from './calendar.js';
export { credentialCache } from './credential-cache.js';
export {
  ConflictError, DomainError, type FieldIssue, NotFoundError, RuleViolationError, UnauthenticatedError,
  ValidationError,
} from './errors.js';
export {
  announceOutboxWrite, EVENT_TOPICS, type EventTopic, newEventId, onOutboxCommit, purgeRelayedOutboxEvents,
  recordEvent, recordEvents, recordShopEvents, redactEvents, type ShopEvent, topicMatches,
} from './events.js';
export { isId, newId, randomString, READABLE_ALPHABET, sha256 } from './ids.js';
export { currencyExponent, currencySchema, formatMoney, lcm, MAX_MINOR, mulDivFloor, parseMoney } from './money.js';
export { MAX_PAGE_SIZE, offsetOf, offsetPageSchema, pageOfKeys } from './offset-pages.js';
export {
  beforeTimeCursor, decodeCursor, encodeCursor, encodeTimeCursor, invalidCursor, nextCursor, type Page, type PageArgs,
  pageBySeq, pagesBySeq, type SeqList,
} from './pagination.js';
export {
  countFailures, type DueWork, failedItems, failingItems, type FailingItems, type FailureCounts, type FailureFilter,
  listFailures, MAX_ATTEMPTS, RETRY_DELAYS_MS, retrySetAside, runClaimed, runClaimedInBatches,
} from './scheduling.js';
export { containsAny, holdsAny, redactedJsonb, type Redactions } from './redaction.js';
export { type SecretBox } from './sealing.js';
export { singleFlight } from './single-flight.js';
export {
  describeIssues, parseInput, pathToUnstorable, safeParseInput, UNSTORABLE_MESSAGE, validationErrorFrom,
} from './validation.js';
