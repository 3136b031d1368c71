import { AppError, hashApiKey } from "@tern/core";
import { apiKeysRepository, conversationsRepository } from "@tern/db";
import type { Context } from "hono";
import { getCookie } from "hono/cookie";
import { createMiddleware } from "hono/factory";
import type { ApiDeps } from "../deps.ts";
import type { KeyUsage } from "./key-usage.ts";

/**
 * Who is calling. Handlers read it with `c.get("principal")` and scope every query to `userId`.
 * - `api_key`: an API key (Authorization: Bearer, or X-Access-Token) of a user.
 * - `session`: a conversation's session_api_key (X-Session-API-Key); it reads that one conversation,
 *   its metadata and its events, and nothing else (the middleware refuses every other route).
 */
export type Principal =
  | { kind: "api_key"; userId: string; isAdmin: boolean; keyId: string }
  | { kind: "session"; userId: string; isAdmin: false; conversationId: string };

/** Hono environment of every authenticated router. */
export interface AuthEnv {
  Variables: { principal: Principal };
}

/** The cookie bull-board's page and its XHRs authenticate with (browsers cannot add headers there). */
export const ADMIN_COOKIE = "tern_admin_key";

// The only routes a session key may call: reads of its own conversation.
const SESSION_ROUTES = [
  /^\/api\/v1\/app-conversations\/?$/,
  /^\/api\/v1\/conversation\/[^/]+\/events\/(search|count)\/?$/,
];
const sessionMayCall = (method: string, path: string): boolean =>
  (method === "GET" || method === "HEAD") && SESSION_ROUTES.some((r) => r.test(path));

const unauthorized = (message: string) => new AppError("unauthorized", message);

const bearerToken = (header: string): string => {
  const match = /^Bearer\s+(\S+)\s*$/i.exec(header);
  if (!match?.[1]) throw unauthorized("Authorization must be 'Bearer <API key>'");
  return match[1];
};

/** Resolves an API key value to its principal; null when it is unknown, revoked or expired. */
const principalOfApiKey = async (
  deps: ApiDeps,
  keyUsage: KeyUsage,
  key: string,
): Promise<Extract<Principal, { kind: "api_key" }> | null> => {
  // Every request asks Postgres (unique index on key_hash), so a revocation or an expiry counts at once.
  const found = await apiKeysRepository(deps.db).findLiveByHash(hashApiKey(key));
  if (!found) return null;
  keyUsage.record(found.key.id);
  return { kind: "api_key", userId: found.user.id, isAdmin: found.user.isAdmin, keyId: found.key.id };
};

const resolvePrincipal = async (c: Context, deps: ApiDeps, keyUsage: KeyUsage): Promise<Principal> => {
  const authorization = c.req.header("authorization");
  const accessToken = c.req.header("x-access-token");
  const apiKey = authorization !== undefined ? bearerToken(authorization) : accessToken?.trim();
  if (apiKey) {
    const principal = await principalOfApiKey(deps, keyUsage, apiKey);
    if (!principal) throw unauthorized("The API key is unknown, revoked or expired");
    return principal;
  }
  const sessionKey = c.req.header("x-session-api-key")?.trim();
  if (sessionKey) {
    const conversation = await conversationsRepository(deps.db).findBySessionKey(sessionKey);
    if (!conversation) throw unauthorized("The session API key is unknown");
    return { kind: "session", userId: conversation.userId, isAdmin: false, conversationId: conversation.id };
  }
  throw unauthorized("Authenticate with 'Authorization: Bearer <API key>' or 'X-Access-Token: <API key>'");
};

/** Authenticates every request of the routes it guards and sets `principal`. */
export const authenticate = (deps: ApiDeps, keyUsage: KeyUsage) =>
  createMiddleware<AuthEnv>(async (c, next) => {
    const principal = await resolvePrincipal(c, deps, keyUsage);
    if (principal.kind === "session" && !sessionMayCall(c.req.method, c.req.path)) {
      throw unauthorized("A session API key only reads its own conversation and its events");
    }
    c.set("principal", principal);
    await next();
  });

/**
 * Operators only (bull-board). Accepts the key as a header like every route, or from the admin
 * cookie, which `/admin/queues?token=<key>` sets so that a browser can use the dashboard.
 */
export const requireAdmin = (deps: ApiDeps, keyUsage: KeyUsage) =>
  createMiddleware<AuthEnv>(async (c, next) => {
    let principal: Principal;
    const cookieKey = getCookie(c, ADMIN_COOKIE);
    const hasHeader =
      c.req.header("authorization") !== undefined ||
      c.req.header("x-access-token") !== undefined ||
      c.req.header("x-session-api-key") !== undefined;
    if (!hasHeader && (c.req.query("token") || cookieKey)) {
      const key = c.req.query("token") || cookieKey || "";
      const found = await principalOfApiKey(deps, keyUsage, key);
      if (!found) throw unauthorized("The API key is unknown, revoked or expired");
      principal = found;
    } else {
      principal = await resolvePrincipal(c, deps, keyUsage);
    }
    if (!principal.isAdmin) throw new AppError("forbidden", "Only operator (admin) keys may use the queue dashboard");
    c.set("principal", principal);
    await next();
  });
