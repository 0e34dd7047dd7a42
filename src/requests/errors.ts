import { databaseBusy } from '../db/busy.js';
import { ConflictError, DomainError, type FieldIssue, NotFoundError, RuleViolationError, UnauthenticatedError, ValidationError } from '../domain/kernel/index.js';

/** The REST error envelope (DESIGN.md "Errors"). */
export type ErrorBody = {
  success: false;
  statusCode: number;
  error: string;
  message: string;
  details?: FieldIssue[];
};

export class HttpError extends Error {
  constructor(
    readonly statusCode: number,
    readonly code: string,
    message: string,
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
  }
}

export class UnauthorizedError extends HttpError {
  constructor(message = 'a valid API key is required: Authorization: Bearer <key>') {
    super(401, 'unauthorized', message, { 'www-authenticate': 'Bearer' });
  }
}

export function domainErrorStatus(err: DomainError): number {
  if (err instanceof ValidationError) return 400;
  if (err instanceof UnauthenticatedError) return 401;
  if (err instanceof NotFoundError) return 404;
  if (err instanceof ConflictError) return 409;
  if (err instanceof RuleViolationError) return 422;
  return 400;
}

// Fastify's own request errors, mapped to the codes DESIGN.md fixes.
const FASTIFY_ERRORS: Record<string, { status: number; code: string; message?: string }> = {
  FST_ERR_CTP_INVALID_MEDIA_TYPE: { status: 400, code: 'unsupported_content_type', message: 'send the body as application/json' },
  FST_ERR_CTP_BODY_TOO_LARGE: { status: 413, code: 'payload_too_large', message: 'the body exceeds 1 MiB' },
  FST_ERR_CTP_INVALID_JSON_BODY: { status: 400, code: 'malformed_json', message: 'the body is not valid JSON' },
  FST_ERR_CTP_EMPTY_JSON_BODY: { status: 400, code: 'malformed_json', message: 'the body is empty but Content-Type is application/json' },
  FST_ERR_CTP_INVALID_CONTENT_LENGTH: { status: 400, code: 'bad_request', message: 'Content-Length does not match the body' },
};

export type ErrorResponse = { body: ErrorBody; headers: Record<string, string>; internal: boolean };

/** Turns anything thrown while serving a request into a status, headers and an envelope. */
export function toErrorResponse(err: unknown): ErrorResponse {
  const make = (statusCode: number, error: string, message: string, extra: Partial<ErrorResponse> = {}) => ({
    body: { success: false as const, statusCode, error, message },
    headers: {},
    internal: false,
    ...extra,
  });
  if (err instanceof DomainError) {
    const response = make(domainErrorStatus(err), err.code, err.message);
    if (err instanceof ValidationError && err.details.length) response.body.details = err.details;
    return response;
  }
  if (err instanceof HttpError) return make(err.statusCode, err.code, err.message, { headers: err.headers });
  const e = (err ?? {}) as { code?: string; statusCode?: number; message?: string };
  const known = e.code ? FASTIFY_ERRORS[e.code] : undefined;
  if (known) return make(known.status, known.code, known.message ?? e.message ?? known.code);
  const busy = databaseBusy(err);
  if (busy) {
    return make(503, busy.code, busy.message, { headers: { 'retry-after': String(busy.retryAfterSec) }, internal: busy.code !== 'overloaded' });
  }
  if (typeof e.statusCode === 'number' && e.statusCode >= 400 && e.statusCode < 500) {
    return make(e.statusCode, 'bad_request', e.message ?? 'bad request');
  }
  return make(500, 'internal_error', 'an unexpected error occurred; it has been logged', { internal: true });
}
