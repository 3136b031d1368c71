import { AppError, type Logger } from "@tern/core";
import type { Context } from "hono";
import { HTTPException } from "hono/http-exception";
import type { ContentfulStatusCode } from "hono/utils/http-status";

const fromHttpException = (err: HTTPException): AppError => {
  switch (err.status) {
    case 400:
      return new AppError("bad_request", err.message || "Malformed request");
    case 401:
      return new AppError("unauthorized", err.message || "Unauthorized");
    case 404:
      return new AppError("not_found", "Not found");
    case 413:
      return new AppError("payload_too_large", "Request body is larger than 1 MiB");
    default:
      return new AppError(
        err.status >= 500 ? "internal" : "bad_request",
        err.status >= 500 ? "Internal error" : err.message,
      );
  }
};

/** The one place an error becomes a response: codes for clients, internals only to the log. */
export const errorResponse = (err: unknown, c: Context, logger: Logger): Response => {
  let appError: AppError;
  if (err instanceof AppError) appError = err;
  else if (err instanceof HTTPException) appError = fromHttpException(err);
  else {
    const requestId = c.get("requestId" as never) as string | undefined;
    logger.error({ err, request_id: requestId, path: c.req.path }, "unhandled error");
    appError = new AppError("internal", `Internal error${requestId ? ` (request ${requestId})` : ""}`);
  }
  const allow = (appError.details as { allow?: unknown } | undefined)?.allow;
  if (appError.code === "method_not_allowed" && Array.isArray(allow)) c.header("Allow", allow.join(", "));
  return c.json(appError.toBody(), appError.status as ContentfulStatusCode);
};
