import type { Logger } from "@tern/core";
import type { Context } from "hono";
import { createMiddleware } from "hono/factory";
import type { RequestIdVariables } from "hono/request-id";
import { matchedRoutes } from "hono/route";

/**
 * The route pattern that answered ("/api/v1/app-conversations/:id"): few distinct values to
 * group by, where the path has an id in it. Middleware (method ALL) is not a route; null when
 * no route matched (a 404).
 */
const routeOf = (c: Context): string | null => matchedRoutes(c).findLast((r) => r.method !== "ALL")?.path ?? null;

/**
 * One line per request, after its response (errors included: the error handler has answered by
 * then): method, route, path, status, duration and the request id that the client got in
 * X-Request-Id and that an "unhandled error" line carries too.
 */
export const requestLog = (logger: Logger) =>
  createMiddleware<{ Variables: RequestIdVariables }>(async (c, next) => {
    const started = performance.now();
    await next();
    logger.info(
      {
        request_id: c.get("requestId"),
        method: c.req.method,
        route: routeOf(c),
        path: c.req.path,
        status: c.res.status,
        duration_ms: Math.round((performance.now() - started) * 10) / 10,
      },
      "request",
    );
  });
