import {
  type DomainError,
  type ErrorBody,
  type ErrorCode,
  httpStatusOf,
  isDomainError,
  type Logger,
  QuotaExceededError,
  RateLimitedError,
} from "@tern/core";
import type { Context } from "hono";
import { HTTPException } from "hono/http-exception";

/** The JSON error body (@tern/core's errorBodySchema, which documents it). */
const errorBody = (code: ErrorCode, message: string, details?: unknown): ErrorBody => ({
  error: { code, message, ...(details === undefined ? {} : { details }) },
  detail: message,
});

const fromHttpException = (err: HTTPException): { code: ErrorCode; message: string } => {
  switch (err.status) {
    case 400:
      return { code: "bad_request", message: err.message || "Malformed request" };
    case 401:
      return { code: "unauthorized", message: err.message || "Unauthorized" };
    case 404:
      return { code: "not_found", message: "Not found" };
    case 413:
      return { code: "payload_too_large", message: "Request body is larger than 1 MiB" };
    default:
      return err.status >= 500
        ? { code: "internal", message: "Internal error" }
        : { code: "bad_request", message: err.message };
  }
};

/** The one place an error becomes a response: codes for clients, internals only to the log. */
export const errorResponse = (err: unknown, c: Context, logger: Logger): Response => {
  if (isDomainError(err)) return domainErrorResponse(err, c);
  if (err instanceof HTTPException) {
    const { code, message } = fromHttpException(err);
    return c.json(errorBody(code, message), httpStatusOf[code]);
  }
  const requestId = c.get("requestId" as never) as string | undefined;
  logger.error({ err, request_id: requestId, path: c.req.path }, "unhandled error");
  return c.json(errorBody("internal", `Internal error${requestId ? ` (request ${requestId})` : ""}`), 500);
};

const domainErrorResponse = (err: DomainError, c: Context): Response => {
  const allow = (err.details as { allow?: unknown } | undefined)?.allow;
  if (err.code === "method_not_allowed" && Array.isArray(allow)) c.header("Allow", allow.join(", "));
  if (err instanceof RateLimitedError || err instanceof QuotaExceededError) {
    c.header("Retry-After", String(err.retryAfterSeconds));
  }
  return c.json(errorBody(err.code, err.message, err.details), httpStatusOf[err.code]);
};
