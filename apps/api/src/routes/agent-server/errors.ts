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
import type { z } from "zod";

/**
 * The agent server's (FastAPI's) requests and errors, for every route of the mount: a request is
 * parsed by a zod schema at the edge (parseRequest), and every refusal leaves as `{"detail": ...}`
 * (agentServerError), a 422's `detail` as FastAPI's list of `{type, loc, msg}` naming each field.
 */

type Where = "query" | "body";

/** One entry of FastAPI's 422 `detail`. */
interface Problem {
  type: string;
  loc: (string | number)[];
  msg: string;
}

/** A ValidationError's detail, as the services, the NUL check and parseRequest write them. */
interface Detail {
  field?: string;
  in?: string;
  message?: string;
  type?: string;
}

/** The one place the mount's error body is written. */
const agentServerError = (c: Context, status: ContentfulStatusCode, detail: unknown): Response =>
  c.json({ detail }, status);

/** `value` as `schema` reads it; a ValidationError naming each field (422) when it does not. */
export const parseRequest = <S extends z.ZodType>(schema: S, value: unknown, where: Where): z.output<S> => {
  const parsed = schema.safeParse(value);
  if (parsed.success) return parsed.data;
  const details: Detail[] = parsed.error.issues.map((issue) => {
    const missing = issue.code === "invalid_type" && /received undefined/.test(issue.message);
    return {
      field: issue.path.map(String).join("."),
      in: where,
      message: missing ? "Field required" : issue.message,
      type: missing ? "missing" : issue.code,
    };
  });
  const first = details[0];
  throw new ValidationError(
    `${where}${first?.field ? `.${first.field}` : ""}: ${first?.message ?? "invalid"}`,
    details,
  );
};

/** The request's JSON body, unparsed by any schema; a body that is not JSON is a 422 on `body`. */
export const jsonBody = async (c: Context): Promise<unknown> => {
  try {
    return await c.req.json();
  } catch {
    throw new ValidationError("body: must be JSON", [
      { field: "", in: "body", message: "Input should be valid JSON", type: "json_invalid" },
    ]);
  }
};

const problemsOf = (err: ValidationError): Problem[] => {
  const details = Array.isArray(err.details) ? (err.details as Detail[]) : [];
  if (details.length === 0) return [{ type: "value_error", loc: ["body"], msg: err.message }];
  return details.map((d) => {
    const where: Where = d.in === "query" ? "query" : "body";
    const path = (d.field ?? "").split(".").filter(Boolean);
    // The services name a body's field with "body." first; FastAPI's loc says it once.
    if (path[0] === where) path.shift();
    // A service's message may not say which field: the dotted name leads it then, as the text a client reads.
    const message = d.message ?? err.message;
    const field = path.join(".");
    const msg = d.type || !field || message.includes(field) ? message : `${field}: ${message}`;
    return { type: d.type ?? "value_error", loc: [where, ...path], msg };
  });
};

/** The mount's error handler: a domain error's status (core's one table), anything else a bare 500. */
export const agentServerErrors =
  (logger: Logger) =>
  (err: Error, c: Context): Response => {
    if (err instanceof ValidationError) return agentServerError(c, 422, problemsOf(err));
    if (err instanceof DomainError) {
      if (err instanceof RateLimitedError || err instanceof QuotaExceededError) {
        c.header("Retry-After", String(err.retryAfterSeconds));
      }
      const allow = (err.details as { allow?: unknown } | undefined)?.allow;
      if (err.code === "method_not_allowed" && Array.isArray(allow)) c.header("Allow", allow.join(", "));
      return agentServerError(c, httpStatusOf[err.code] as ContentfulStatusCode, err.message);
    }
    logger.error({ err, path: c.req.path }, "agent-server route failed");
    return agentServerError(c, 500, "Internal Server Error");
  };
