import { createHash, randomBytes } from "node:crypto";
import { ForbiddenError, hashApiKey, UnauthorizedError } from "@tern/core";
import { apiKeysRepository } from "@tern/db";
import { holderOfSessionKey, sandboxOfSessionKey, sessionOf } from "@tern/services";
import type { Context } from "hono";
import { getCookie } from "hono/cookie";
import { createMiddleware } from "hono/factory";
import type { ApiDeps } from "../deps.ts";
import { openPageSession, PAGE_COOKIE } from "../page/session.ts";
import type { CachedKey } from "./key-cache.ts";
import type { KeyUsage } from "./key-usage.ts";

/**
 * Who is calling. Handlers read it with `c.get("principal")` and scope every query to `userId`.
 * - `api_key`: an API key (Authorization: Bearer, or X-Access-Token) of a user.
 * - `session`: a conversation's session_api_key (X-Session-API-Key); on these routes it reads that
 *   one conversation and its events, and may interrupt it and answer its confirmations (the
 *   middleware refuses every other route). Its agent server is the mount's (routes/agent-server).
 * - `read_only`: a conversation's read-only key: it reads that conversation and its events, and
 *   does nothing else, here or anywhere.
 */
export type Principal =
  | { kind: "api_key"; userId: string; isAdmin: boolean; keyId: string }
  | { kind: "session" | "read_only"; userId: string; isAdmin: false; conversationId: string };

/** Hono environment of every authenticated router. */
export interface AuthEnv {
  Variables: { principal: Principal };
}

/**
 * The cookie bull-board's page and its XHRs authenticate with (browsers cannot add headers there):
 * a random session id, never the key. Redis keeps only its SHA-256, with the id of the admin key
 * that opened it, for ADMIN_SESSION_TTL_SECONDS; the key is checked again on every request, so
 * revoking it (or its expiry) ends the session at once.
 */
export const ADMIN_COOKIE = "tern_admin_session";
export const ADMIN_SESSION_TTL_SECONDS = 15 * 60;

const sessionRedisKey = (deps: ApiDeps, sessionId: string) =>
  `${deps.config.REDIS_PREFIX}:admin-session:${createHash("sha256").update(sessionId).digest("hex")}`;

/** A new dashboard session for an admin key; returns the id the cookie carries. */
export const openAdminSession = async (deps: ApiDeps, keyId: string): Promise<string> => {
  const id = randomBytes(32).toString("base64url");
  await deps.redis.set(sessionRedisKey(deps, id), keyId, "EX", ADMIN_SESSION_TTL_SECONDS);
  return id;
};

const principalOfAdminSession = async (
  deps: ApiDeps,
  keyUsage: KeyUsage,
  sessionId: string,
): Promise<Extract<Principal, { kind: "api_key" }> | null> => {
  const keyId = await deps.redis.get(sessionRedisKey(deps, sessionId)).catch(() => null);
  if (!keyId) return null;
  const found = await apiKeysRepository(deps.db).findLiveById(keyId);
  if (!found) return null;
  keyUsage.record(found.key.id);
  return { kind: "api_key", userId: found.user.id, isAdmin: found.user.isAdmin, keyId: found.key.id };
};

/**
 * A state-changing request authenticated by the dashboard's cookie must come from a page of this
 * deployment (the cookie is SameSite=Strict; this holds where that does not, and for old browsers).
 */
const sameOrigin = (c: Context, deps: ApiDeps): boolean => {
  const origin = c.req.header("origin");
  if (!origin) return false;
  const own = [new URL(deps.config.publicUrl).origin, new URL(c.req.url).origin];
  return own.includes(origin);
};

// The only routes a session key may call: reads of its own conversation.
const SESSION_ROUTES = [
  /^\/api\/v1\/app-conversations\/?$/,
  /^\/api\/v1\/conversation\/[^/]+\/events\/(search|count|stream)\/?$/,
  /^\/sockets\/events\/[^/]+\/?$/,
];
// ...and two commands (each route scopes it to that conversation): stopping its own conversation's
// agent, and answering its tool calls that wait for confirmation (the agent server's key may, in OpenHands).
const SESSION_COMMANDS = [
  /^\/api\/v1\/conversation\/[^/]+\/interrupt\/?$/,
  /^\/api\/v1\/conversation\/[^/]+\/events\/respond_to_confirmation\/?$/,
];
const mayRead = (method: string, path: string): boolean =>
  (method === "GET" || method === "HEAD") && SESSION_ROUTES.some((r) => r.test(path));
const sessionMayCall = (method: string, path: string): boolean =>
  mayRead(method, path) || (method === "POST" && SESSION_COMMANDS.some((r) => r.test(path)));

const unauthorized = (message: string) => new UnauthorizedError(message);

// OpenHands' socket clients pass the session key in the query (a browser WebSocket has no headers).
const sessionKeyOfSocket = (c: Context): string | undefined =>
  c.req.path.startsWith("/sockets/") ? c.req.query("session_api_key")?.trim() || undefined : undefined;

const bearerToken = (header: string): string => {
  const match = /^Bearer\s+(\S+)\s*$/i.exec(header);
  if (!match?.[1]) throw unauthorized("Authorization must be 'Bearer <API key>'");
  return match[1];
};

const apiKeyPrincipal = (keyUsage: KeyUsage, k: CachedKey): Extract<Principal, { kind: "api_key" }> => {
  keyUsage.record(k.keyId);
  return { kind: "api_key", userId: k.userId, isAdmin: k.isAdmin, keyId: k.keyId };
};

/**
 * Resolves an API key value to its principal; null when it is unknown, revoked or expired. The
 * key cache (when the process has one) answers without Postgres: revocations reach it by pub/sub
 * on every replica, and a cached key past its expires_at fails on time. Otherwise Postgres (unique
 * index on key_hash) answers, and a live key is cached.
 */
export const principalOfApiKey = async (
  deps: ApiDeps,
  keyUsage: KeyUsage,
  key: string,
): Promise<Extract<Principal, { kind: "api_key" }> | null> => {
  const live = await liveApiKey(deps, key);
  return live ? apiKeyPrincipal(keyUsage, live) : null;
};

/** A live API key, as the cache keeps it (see principalOfApiKey); null when unknown, revoked or expired. */
const liveApiKey = async (deps: Pick<ApiDeps, "db" | "keyCache">, key: string): Promise<CachedKey | null> => {
  const hash = hashApiKey(key);
  const cache = deps.keyCache;
  const now = Date.now();
  const cached = cache?.get(hash, now);
  if (cached) return cached.expiresAtMs !== null && cached.expiresAtMs <= now ? null : cached;
  // Taken before the query: an invalidation while it runs keeps its (maybe stale) answer out of the cache.
  const epoch = cache?.epoch ?? 0;
  const found = await apiKeysRepository(deps.db).findLiveByHash(hash);
  if (!found) return null;
  const entry: CachedKey = {
    keyId: found.key.id,
    userId: found.user.id,
    isAdmin: found.user.isAdmin,
    expiresAtMs: found.key.expiresAt === null ? null : Date.parse(found.key.expiresAt),
  };
  if (!Number.isNaN(entry.expiresAtMs)) cache?.set(hash, entry, epoch);
  return entry;
};

/**
 * What a pasted key is (the conversation page's sign-in): a live API key, read through the key
 * cache as every request's is (so a revocation reaches it on every replica), or a conversation's
 * session key; null when neither.
 */
export const kindOfKey = async (deps: ApiDeps, key: string): Promise<Principal["kind"] | null> => {
  if (await liveApiKey(deps, key)) return "api_key";
  return (await principalOfSessionKey(deps, key))?.kind ?? null;
};

/** The principal of a conversation's session key or read-only key; null when no live conversation holds it. */
const principalOfSessionKey = async (deps: ApiDeps, key: string): Promise<Principal | null> => {
  const holder = await holderOfSessionKey(deps, key, { conversationsOnly: true });
  if (!holder || holder.kind === "sandbox") return null;
  const { userId, conversationId } = sessionOf(holder);
  return { kind: holder.kind === "read_only" ? "read_only" : "session", userId, isAdmin: false, conversationId };
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
  const sessionKey = c.req.header("x-session-api-key")?.trim() ?? sessionKeyOfSocket(c);
  if (sessionKey) {
    const principal = await principalOfSessionKey(deps, sessionKey);
    if (!principal) throw unauthorized("The session API key is unknown");
    return principal;
  }
  // The conversation page's cookie (a browser cannot add headers to an EventSource): the key it
  // holds, an API key or a session key. Writes must also carry X-Tern-Page, which another site
  // cannot add without a CORS preflight we never grant, so the cookie alone cannot forge them.
  const pageCookie = getCookie(c, PAGE_COOKIE);
  if (pageCookie) {
    const key = openPageSession(deps.secretBox, pageCookie);
    if (!key) throw unauthorized("The page session expired; sign in again");
    if (!["GET", "HEAD"].includes(c.req.method) && c.req.header("x-tern-page") !== "1") {
      throw new ForbiddenError("A write signed in by the page cookie must carry X-Tern-Page: 1");
    }
    const principal = await principalOfApiKey(deps, keyUsage, key);
    if (principal) return principal;
    const session = await principalOfSessionKey(deps, key);
    if (!session) throw unauthorized("The page's key is unknown, revoked or expired; sign in again");
    return session;
  }
  throw unauthorized("Authenticate with 'Authorization: Bearer <API key>' or 'X-Access-Token: <API key>'");
};

/** The caller when the request carries a valid credential; null otherwise (never throws for a bad one). */
export const optionalPrincipal = async (c: Context, deps: ApiDeps, keyUsage: KeyUsage): Promise<Principal | null> => {
  try {
    return await resolvePrincipal(c, deps, keyUsage);
  } catch (err) {
    if (err instanceof UnauthorizedError) return null;
    throw err;
  }
};

/** A sandbox's settings routes (routes/sandboxes/settings-secrets.ts): its session key, not an API key. */
const SANDBOX_SETTINGS_PATH = /^\/api\/v1\/sandboxes\/[^/]+\/settings(\/|$)/;

const sessionKeyHeader = (c: Context): string | null => c.req.header("x-session-api-key")?.trim() || null;

/** Authenticates every request of the routes it guards and sets `principal`. */
export const authenticate = (deps: ApiDeps, keyUsage: KeyUsage) =>
  createMiddleware<AuthEnv>(async (c, next) => {
    if (SANDBOX_SETTINGS_PATH.test(c.req.path)) {
      // A sandbox's settings: its session key only, and only for that sandbox (the owner is the caller).
      const sandbox = await sandboxOfSessionKey(deps, c.req.path.split("/")[4] ?? "", sessionKeyHeader(c));
      const userId = sandbox.userId as string;
      c.set("principal", {
        kind: "session",
        userId,
        isAdmin: false,
        conversationId: sandbox.conversationId ?? sandbox.id,
      });
      await next();
      return;
    }
    const principal = await resolvePrincipal(c, deps, keyUsage);
    if (principal.kind === "session" && !sessionMayCall(c.req.method, c.req.path)) {
      throw unauthorized(
        "A session API key only reads its own conversation and its events, and may interrupt it or answer its confirmations",
      );
    }
    if (principal.kind === "read_only" && !mayRead(c.req.method, c.req.path)) {
      throw unauthorized("A read-only key only reads its own conversation and its events");
    }
    c.set("principal", principal);
    await next();
  });

/**
 * Operators only (bull-board). Accepts an admin key as a header like every route, or the dashboard
 * session's cookie (see ADMIN_COOKIE), which `/admin/queues?token=<key>` opens. A request the
 * cookie authenticates that changes something (not GET or HEAD) must carry this deployment's Origin.
 */
export const requireAdmin = (deps: ApiDeps, keyUsage: KeyUsage) =>
  createMiddleware<AuthEnv>(async (c, next) => {
    let principal: Principal;
    const sessionId = getCookie(c, ADMIN_COOKIE);
    const token = c.req.query("token");
    const hasHeader =
      c.req.header("authorization") !== undefined ||
      c.req.header("x-access-token") !== undefined ||
      c.req.header("x-session-api-key") !== undefined;
    if (!hasHeader && token) {
      const found = await principalOfApiKey(deps, keyUsage, token);
      if (!found) throw unauthorized("The API key is unknown, revoked or expired");
      principal = found;
    } else if (!hasHeader && sessionId) {
      const found = await principalOfAdminSession(deps, keyUsage, sessionId);
      if (!found) throw unauthorized("The dashboard session ended; open /admin/queues?token=<admin key> again");
      if (c.req.method !== "GET" && c.req.method !== "HEAD" && !sameOrigin(c, deps)) {
        throw new ForbiddenError("The dashboard's actions must come from its own pages (Origin)");
      }
      principal = found;
    } else {
      principal = await resolvePrincipal(c, deps, keyUsage);
    }
    if (!principal.isAdmin) throw new ForbiddenError("Only operator (admin) keys may use the queue dashboard");
    c.set("principal", principal);
    await next();
  });
