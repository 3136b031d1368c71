import {
  BadRequestError,
  ConflictError,
  type DomainError,
  type ErrorCode,
  ForbiddenError,
  GoneError,
  NotFoundError,
  PayloadTooLargeError,
  RepositoryFaultError,
  UnauthorizedError,
  UnavailableError,
  ValidationError,
} from "./errors.ts";

/**
 * THE one table from error codes to HTTP statuses, for every HTTP surface we serve: the public API
 * (apps/api's error middleware), the workers' internal server (apps/worker/src/http/server.ts), and
 * the client that reads the internal server's refusals (@tern/services' worker-access.ts). Three
 * copies of it once drifted: a worker's `validation_failed` reached clients as a 500.
 */
export const httpStatusOf = {
  bad_request: 400,
  unauthorized: 401,
  forbidden: 403,
  not_found: 404,
  method_not_allowed: 405,
  conflict: 409,
  gone: 410,
  payload_too_large: 413,
  validation_failed: 422,
  repository_fault: 422,
  rate_limited: 429,
  quota_exceeded: 429,
  internal: 500,
  service_unavailable: 503,
} as const satisfies Record<ErrorCode, number>;

/**
 * The domain error a code names, rebuilt on the far side of a process boundary from an error body
 * (`{ error: { code, message, details } }`), so it reaches its client with the same code and status
 * as where it was thrown. Null for the codes that say nothing to pass on (`internal`: the far side's
 * own fault, logged there) or that need more than a body holds (a rate limit's retry hint).
 */
const rebuild: Record<ErrorCode, ((message: string, details?: unknown) => DomainError) | null> = {
  bad_request: (m, d) => new BadRequestError(m, d),
  unauthorized: (m, d) => new UnauthorizedError(m, d),
  forbidden: (m, d) => new ForbiddenError(m, d),
  not_found: (m, d) => new NotFoundError(m, d),
  method_not_allowed: null,
  conflict: (m, d) => new ConflictError(m, d),
  gone: (m, d) => new GoneError(m, d),
  payload_too_large: (m, d) => new PayloadTooLargeError(m, d),
  validation_failed: (m, d) => new ValidationError(m, d),
  repository_fault: (m, d) => new RepositoryFaultError(m, d),
  rate_limited: null,
  quota_exceeded: null,
  internal: null,
  service_unavailable: (m, d) => new UnavailableError(m, d),
};

export const domainErrorOf = (code: unknown, message: string, details?: unknown): DomainError | null =>
  typeof code === "string" && Object.hasOwn(rebuild, code)
    ? (rebuild[code as ErrorCode]?.(message, details) ?? null)
    : null;
