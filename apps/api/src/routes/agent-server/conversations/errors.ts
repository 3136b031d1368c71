import {
  DomainError,
  httpStatusOf,
  type Logger,
  QuotaExceededError,
  RateLimitedError,
  ValidationError,
} from "@tern/core";
import type { Context } from "hono";
import type { ContentfulStatusCode } from "hono/utils/http-status";

/**
 * Errors as the agent server (FastAPI) answers them: `{"detail": "..."}` with the status of the
 * domain error (core's one table), and a 422's `detail` as FastAPI's list of
 * `{loc, msg, type}` naming each field.
 */
export const agentServerError =
  (logger: Logger) =>
  (err: Error, c: Context): Response => {
    if (err instanceof ValidationError) {
      const details = Array.isArray(err.details)
        ? (err.details as { field?: string; in?: string; message?: string }[])
        : [];
      const detail = details.length
        ? details.map((d) => ({
            loc: [d.in === "query" ? "query" : "body", ...(d.field ? d.field.split(".").filter(Boolean) : [])],
            msg: err.message,
            type: "value_error",
          }))
        : [{ loc: ["body"], msg: err.message, type: "value_error" }];
      return c.json({ detail }, 422);
    }
    if (err instanceof DomainError) {
      const status = httpStatusOf[err.code] as ContentfulStatusCode;
      if (err instanceof RateLimitedError || err instanceof QuotaExceededError) {
        c.header("Retry-After", String(err.retryAfterSeconds));
      }
      return c.json({ detail: err.message }, status);
    }
    logger.error({ err }, "agent-server route failed");
    return c.json({ detail: "Internal Server Error" }, 500);
  };
