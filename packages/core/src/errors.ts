/**
 * Errors of the domain, apart from HTTP. Each has a stable `code` (clients may rely on it once the
 * API has mapped it) and a message fit for whoever caused it. Whether to retry is a property of the
 * type, not of a status: a worker retries only `transient` errors, and ends the job at once on any
 * other DomainError (the user's or the repository's to fix). Codes become statuses in one table
 * (error-statuses.ts), which every HTTP surface uses; nothing here knows HTTP.
 */
export const errorCodes = [
  "bad_request",
  "unauthorized",
  "forbidden",
  "not_found",
  "method_not_allowed",
  "conflict",
  "gone",
  "payload_too_large",
  "validation_failed",
  "repository_fault",
  "rate_limited",
  "quota_exceeded",
  "internal",
  "service_unavailable",
] as const;

export type ErrorCode = (typeof errorCodes)[number];

export abstract class DomainError extends Error {
  abstract readonly code: ErrorCode;
  /** A passing fault: the same call may succeed later unchanged. Only these are retried. */
  readonly transient: boolean = false;
  readonly details: unknown;

  constructor(message: string, details?: unknown) {
    super(message);
    this.name = new.target.name;
    this.details = details;
  }
}

/** The base of a DomainError of one code: `class NotFoundError extends coded("not_found") {}`. */
const coded = <C extends ErrorCode>(code: C) => {
  abstract class Coded extends DomainError {
    readonly code: C = code;
  }
  return Coded;
};

/** Malformed input that could not even be validated (bad JSON, a forged cursor). */
export class BadRequestError extends coded("bad_request") {}

/** Input that parsed but breaks a rule; `details` lists `{field, in, message}` per problem. */
export class ValidationError extends coded("validation_failed") {}

/** No credential, or one that is unknown, revoked or expired. */
export class UnauthorizedError extends coded("unauthorized") {}

export class ForbiddenError extends coded("forbidden") {}

/** Unknown, or another user's: the two are never told apart. */
export class NotFoundError extends coded("not_found") {}

/** The resource is in a state that refuses the request now (e.g. a run already going). */
export class ConflictError extends coded("conflict") {}

/** The resource existed and is gone for good (e.g. a removed sandbox). */
export class GoneError extends coded("gone") {}

export class PayloadTooLargeError extends coded("payload_too_large") {}

export class RateLimitedError extends DomainError {
  readonly code = "rate_limited";
  constructor(
    message: string,
    readonly retryAfterSeconds: number,
  ) {
    super(message);
  }
}

/**
 * A tenant holds all it may of something (sandboxes, starts in flight, keys). `quota` names the
 * setting that bounds it; the message says what frees a slot. Waiting may help (a start finishes,
 * an idle sandbox is removed), so a retry hint is given as for a rate limit.
 */
export class QuotaExceededError extends DomainError {
  readonly code = "quota_exceeded";
  constructor(
    message: string,
    readonly quota: string,
    readonly limit: number,
    readonly retryAfterSeconds: number,
  ) {
    super(message, { quota, limit });
  }
}

/**
 * The conversation holds MAX_EVENTS_PER_CONVERSATION events: nothing more is appended to it
 * (the agent's closing error and state change aside). A new conversation continues the work.
 */
export class EventLimitError extends ConflictError {
  constructor(readonly limit: number) {
    super(
      `The conversation has reached its limit of ${limit} events (MAX_EVENTS_PER_CONVERSATION); start a new conversation to continue`,
      { limit },
    );
  }
}

/**
 * The repository's own code failed: its setup script, its hooks, its skills. The user's to fix;
 * never retried (a retry would run earlier stages again in a container that code controls).
 */
export class RepositoryFaultError extends coded("repository_fault") {}

/** A service we depend on (the job queue, the sandbox engine) is unreachable now; try again. */
export class UnavailableError extends DomainError {
  readonly code = "service_unavailable";
  override readonly transient = true;
}

export const isDomainError = (err: unknown): err is DomainError => err instanceof DomainError;

/** A fault of the user or of the repository: fail at once, never retry. */
export const isPermanentFault = (err: unknown): err is DomainError => isDomainError(err) && !err.transient;

/** The job queue is unreachable: the one message every producer gives. */
export const queueUnavailable = (): UnavailableError =>
  new UnavailableError("The job queue is unreachable; try again shortly");
