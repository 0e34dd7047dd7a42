/**
 * Errors the domain raises. `code` is the stable string clients see: the REST `error` field and
 * the GraphQL `userErrors[].code` / `extensions.code`. Each face maps the class to its own shape.
 */
export abstract class DomainError extends Error {
  abstract readonly code: string;
  constructor(
    message: string,
    /** Path of the input field at fault, when there is one (GraphQL `userErrors[].field`). */
    readonly field?: string[],
  ) {
    super(message);
    this.name = new.target.name;
  }
}

export type FieldIssue = { path: string; message: string };

/** The request is malformed: wrong types, missing or unknown fields, values out of range. */
export class ValidationError extends DomainError {
  readonly code = 'validation_error';
  constructor(
    message: string,
    readonly details: FieldIssue[] = [],
  ) {
    super(message, details[0] ? details[0].path.split('.').filter(Boolean) : undefined);
  }
}

export class NotFoundError extends DomainError {
  constructor(
    readonly code: string,
    message: string,
    field?: string[],
  ) {
    super(message, field);
  }
}

/** Well-formed, but a business rule refuses it (not enough points, inactive reward, …). */
export class RuleViolationError extends DomainError {
  constructor(
    readonly code: string,
    message: string,
    field?: string[],
  ) {
    super(message, field);
  }
}

/** Clashes with existing state: a duplicate, a key reused with another request. */
export class ConflictError extends DomainError {
  constructor(
    readonly code: string,
    message: string,
    field?: string[],
  ) {
    super(message, field);
  }
}

/** The request does not prove who sent it: a signature that does not match, say. */
export class UnauthenticatedError extends DomainError {
  constructor(
    readonly code: string,
    message: string,
    field?: string[],
  ) {
    super(message, field);
  }
}
