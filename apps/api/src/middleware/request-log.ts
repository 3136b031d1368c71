import type { Logger } from "@tern/core";
import type { Context } from "hono";
import { createMiddleware } from "hono/factory";
import type { RequestIdVariables } from "hono/request-id";
import { matchedRoutes } from "hono/route";

/**
 * Which requests get a line (ACCESS_LOG): `all`, every one; `errors`, those that answered 4xx or
 * 5xx or took at least the slow threshold. A line per successful read costs the hot reads a
 * synchronous write each (measured at ~8 % of the API's CPU under the events search), and the
 * metrics' histogram already counts them by route and status.
 */
type AccessLogMode = "all" | "errors";

export interface AccessLogOptions {
  mode: AccessLogMode;
  /** A request this slow (ms) is logged in `errors` mode too, whatever its status. */
  slowMs: number;
}

/**
 * The route pattern that answered ("/api/v1/app-conversations/:id"): few distinct values to
 * group by, where the path has an id in it. Middleware (method ALL) is not a route; null when
 * no route matched (a 404).
 */
const routeOf = (c: Context): string | null => matchedRoutes(c).findLast((r) => r.method !== "ALL")?.path ?? null;

/**
 * One line per request the mode keeps, after its response (errors included: the error handler
 * has answered by then): method, route, path, status, duration and the request id that the
 * client got in X-Request-Id and that an "unhandled error" line carries too.
 */
export const requestLog = (logger: Logger, opts: AccessLogOptions) =>
  createMiddleware<{ Variables: RequestIdVariables }>(async (c, next) => {
    const started = performance.now();
    await next();
    const durationMs = performance.now() - started;
    const status = c.res.status;
    if (opts.mode === "errors" && status < 400 && durationMs < opts.slowMs) return;
    logger.info(
      {
        request_id: c.get("requestId"),
        method: c.req.method,
        route: routeOf(c),
        path: c.req.path,
        status,
        duration_ms: Math.round(durationMs * 10) / 10,
      },
      "request",
    );
  });
