import { RateLimitedError } from "@tern/core";
import type { Context } from "hono";
import { createMiddleware } from "hono/factory";
import type { Redis } from "ioredis";
import {
  type RateLimiterAbstract,
  RateLimiterMemory,
  RateLimiterRedis,
  RateLimiterRes,
  RLWrapperTimeouts,
} from "rate-limiter-flexible";
import type { ApiConfig } from "../config.ts";
import type { AuthEnv } from "./auth.ts";

/** The budgets a request may draw on: every request the general one, starts and messages theirs too. */
export type RateBudget = "general" | "starts" | "messages";

const STARTS: RegExp[] = [
  /^\/api\/v1\/app-conversations\/?$/,
  /^\/api\/v1\/app-conversations\/stream-start\/?$/,
  // The agent server's (routes/agent-server): a conversation started there.
  /^\/agent\/[^/]+\/api\/conversations\/?$/,
];
const MESSAGES: RegExp[] = [
  /^\/api\/v1\/app-conversations\/[^/]+\/send-message\/?$/,
  /^\/api\/v1\/conversation\/[^/]+\/events\/?$/,
  /^\/api\/v1\/conversations\/[^/]+\/pending-messages\/?$/,
  /^\/agent\/[^/]+\/api\/conversations\/[^/]+\/events\/?$/,
];

/**
 * The stricter budget a request draws on besides the general one: starts take a sandbox and a
 * start job, messages an agent run (LLM calls on the operator's key). By path, so that routes
 * added later under these paths are counted too.
 */
export const budgetOf = (method: string, path: string): RateBudget | null => {
  if (method !== "POST") return null;
  if (STARTS.some((r) => r.test(path))) return "starts";
  if (MESSAGES.some((r) => r.test(path))) return "messages";
  return null;
};

const WINDOW_S = 60;
/** Past this, a slow Redis counts as down for the limiter (the request is not held up for it). */
const REDIS_TIMEOUT_MS = 500;

interface Verdict {
  budget: RateBudget;
  limit: number;
  remaining: number;
  resetSeconds: number;
  refused: boolean;
}

export interface RateLimiter {
  /** Draws one point from the general budget and, when given, from `budget`; the tightest verdict. */
  check(key: string, budget: RateBudget | null): Promise<Verdict | null>;
}

const verdictOf = (budget: RateBudget, limit: number, res: RateLimiterRes, refused: boolean): Verdict => ({
  budget,
  limit,
  remaining: Math.max(0, res.remainingPoints),
  resetSeconds: Math.max(1, Math.ceil(res.msBeforeNext / 1000)),
  refused,
});

/**
 * Fixed one-minute windows per key, counted in Redis (rate-limiter-flexible's RateLimiterRedis on
 * the API's own connection, keys under `REDIS_PREFIX:ratelimit:`), so every API replica draws on
 * the same budget. When Redis is down or slower than REDIS_TIMEOUT_MS, each replica counts in its
 * own memory instead (the library's insurance limiter): the limit still holds per replica, and no
 * request fails because of the limiter. Refusing everything (503) would take reads down with
 * Redis, which they do not need. Null when every limit is off (0).
 */
export const createRateLimiter = (
  redis: Redis,
  prefix: string,
  limits: Pick<ApiConfig, "RATE_LIMIT_PER_MINUTE" | "RATE_LIMIT_STARTS_PER_MINUTE" | "RATE_LIMIT_MESSAGES_PER_MINUTE">,
): RateLimiter | null => {
  const points: Record<RateBudget, number> = {
    general: limits.RATE_LIMIT_PER_MINUTE,
    starts: limits.RATE_LIMIT_STARTS_PER_MINUTE,
    messages: limits.RATE_LIMIT_MESSAGES_PER_MINUTE,
  };
  const limiters = new Map<RateBudget, RateLimiterAbstract>();
  for (const budget of Object.keys(points) as RateBudget[]) {
    const n = points[budget];
    if (n <= 0) continue;
    const insuranceLimiter = new RateLimiterMemory({ points: n, duration: WINDOW_S });
    const store = new RateLimiterRedis({
      storeClient: redis,
      keyPrefix: `${prefix}:ratelimit:${budget}`,
      points: n,
      duration: WINDOW_S,
      rejectIfRedisNotReady: true,
      insuranceLimiter,
    });
    limiters.set(budget, new RLWrapperTimeouts({ limiter: store, timeoutMs: REDIS_TIMEOUT_MS, insuranceLimiter }));
  }
  if (limiters.size === 0) return null;

  const draw = async (budget: RateBudget, key: string): Promise<Verdict | null> => {
    const limiter = limiters.get(budget);
    if (!limiter) return null;
    try {
      return verdictOf(budget, points[budget], await limiter.consume(key), false);
    } catch (err) {
      if (err instanceof RateLimiterRes) return verdictOf(budget, points[budget], err, true);
      // Both Redis and the memory fallback failed: let the request through rather than fail it.
      return null;
    }
  };

  return {
    async check(key, budget) {
      const general = await draw("general", key);
      if (general?.refused || !budget) return general;
      const specific = await draw(budget, key);
      if (!specific) return general;
      if (!general || specific.refused) return specific;
      // Report the budget closest to running out: the one a client must pace itself by.
      return specific.remaining <= general.remaining ? specific : general;
    },
  };
};

/** The IETF draft's headers (draft-ietf-httpapi-ratelimit-headers): limit, what is left, seconds to the reset. */
const headersOf = (v: Verdict): Record<string, string> => ({
  "RateLimit-Limit": String(v.limit),
  "RateLimit-Remaining": String(v.remaining),
  "RateLimit-Reset": String(v.resetSeconds),
});

const keyOf = (c: Context<AuthEnv>): string => {
  const p = c.get("principal");
  return p.kind === "api_key" ? `key:${p.keyId}` : `session:${p.conversationId}`;
};

/**
 * Per key (a session key counts as its own): past a budget, 429 with Retry-After and the
 * RateLimit-* headers, which every limited answer carries too. Runs after authentication.
 */
export const rateLimit = (limiter: RateLimiter) =>
  createMiddleware<AuthEnv>(async (c, next) => {
    const verdict = await limiter.check(keyOf(c), budgetOf(c.req.method, c.req.path));
    if (verdict?.refused) {
      for (const [name, value] of Object.entries(headersOf(verdict))) c.header(name, value);
      const what = verdict.budget === "general" ? "requests" : verdict.budget;
      throw new RateLimitedError(
        `Rate limit exceeded: at most ${verdict.limit} ${what} per minute for this key; retry in ${verdict.resetSeconds} s`,
        verdict.resetSeconds,
      );
    }
    await next();
    if (verdict) for (const [name, value] of Object.entries(headersOf(verdict))) c.res.headers.set(name, value);
  });
