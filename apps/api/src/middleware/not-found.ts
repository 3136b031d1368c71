import { DomainError, NotFoundError } from "@tern/core";
import type { Context } from "hono";

/** A known path asked with a method it does not answer; `details.allow` lists the ones it does. */
class MethodNotAllowedError extends DomainError {
  readonly code = "method_not_allowed";
}

interface RouteEntry {
  method: string;
  path: string;
}

// "/api/keys/:id" → /^\/api\/keys\/[^/]+\/?$/; "*" matches anything.
const toRegExp = (path: string): RegExp => {
  const source = path
    .split("/")
    .map((part) => {
      if (part === "*") return ".*";
      if (part.startsWith(":")) return "[^/]+";
      return part.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
    })
    .join("/");
  return new RegExp(`^${source}/?$`);
};

/**
 * Unknown route: 404. A known path asked with a method it does not answer: 405 with `Allow`.
 * `routes` is the app's route table (middleware shows as method ALL and is ignored).
 */
export const notFoundOrMethodNotAllowed = (
  routes: () => RouteEntry[],
  /** The messages, when not these (the agent server's are FastAPI's: "Not Found", "Method Not Allowed"). */
  messages: { notFound?: string; methodNotAllowed?: string } = {},
) => {
  let table: { method: string; pattern: RegExp }[] | null = null;
  return (c: Context): never => {
    table ??= routes()
      .filter((r) => r.method !== "ALL")
      .map((r) => ({ method: r.method, pattern: toRegExp(r.path) }));
    const path = c.req.path;
    const allowed = [...new Set(table.filter((r) => r.pattern.test(path)).map((r) => r.method))];
    if (allowed.length > 0 && !allowed.includes(c.req.method)) {
      const message =
        messages.methodNotAllowed ?? `${c.req.method} is not allowed on ${path}; use ${allowed.join(", ")}`;
      throw new MethodNotAllowedError(message, { allow: allowed });
    }
    throw new NotFoundError(messages.notFound ?? "No such route");
  };
};
