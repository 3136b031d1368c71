import { randomUUID } from "node:crypto";
import { RateLimitedError } from "@tern/core";
import type { Context } from "hono";
import { createMiddleware } from "hono/factory";
import type { Redis } from "ioredis";
import type { ApiConfig } from "../config.ts";
import type { AuthEnv, Principal } from "./auth.ts";

/** The budgets a request may draw on: every request the general one, starts and messages theirs too. */
export type RateBudget = "general" | "starts" | "messages";

const STARTS: RegExp[] = [
  /^\/api\/v1\/app-conversations\/?$/,
  /^\/api\/v1\/app-conversations\/stream-start\/?$/,
  // A sandbox made on its own (POST /api/v1/sandboxes): a start without a conversation.
  /^\/api\/v1\/sandboxes\/?$/,
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

const WINDOW_MS = 60_000;
/** Past this, a slow Redis counts as down for the limiter (no request is held up for it longer). */
const REDIS_TIMEOUT_MS = 500;
/** A replica not heard from for this long no longer counts in the lease sizes. */
const REPLICA_TTL_MS = 5_000;
/** With Redis down, how often a request may try it again (in the background). */
const RETRY_MS = 1_000;

/**
 * A replica's next lease of a key's window, decided in Redis from what is left now and the live
 * replicas now (this one registered by the call): `ceil((limit - reserved) / (2 × replicas))`,
 * never past the limit. Returns [granted, reserved in all].
 */
const LEASE_SCRIPT = `
redis.call('zadd', KEYS[2], ARGV[2], ARGV[4])
redis.call('zremrangebyscore', KEYS[2], '-inf', tonumber(ARGV[2]) - tonumber(ARGV[3]))
redis.call('pexpire', KEYS[2], tonumber(ARGV[3]) * 2)
local replicas = redis.call('zcard', KEYS[2])
local limit = tonumber(ARGV[1])
local reserved = tonumber(redis.call('get', KEYS[1]) or '0')
local ask = math.ceil((limit - reserved) / (2 * replicas))
if ask > 0 then reserved = redis.call('incrby', KEYS[1], ask) else ask = 0 end
redis.call('pexpire', KEYS[1], tonumber(ARGV[5]) * 2)
return {ask, reserved}
`;

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

/** One key's budget in this replica, for the current window. */
interface Count {
  redisKey: string;
  window: number;
  /** Points reserved in Redis by all replicas, as of this replica's last reservation. */
  reserved: number;
  /** Points this replica reserved and has not spent yet. */
  lease: number;
  /** The size of the last reservation (a new one is asked for when half of it is spent). */
  lastAsk: number;
  /** Points this replica drew in the window: what it goes by alone while Redis is down. */
  local: number;
  /** A reservation under way, shared by whoever needs it. */
  pending: Promise<void> | null;
}

/**
 * Fixed one-minute windows per key (aligned to the minute), drawn from leases: each replica
 * reserves points of a key's window in Redis (INCRBY of the key's counter under
 * `REDIS_PREFIX:ratelimit:`, one pipeline with its heartbeat as a live replica) and spends them
 * from memory, so a request costs no Redis round trip. A lease is a share of what is left,
 * `ceil((limit - reserved) / (2 × live replicas))`, and the next one is asked for in the
 * background once half of it is spent; Redis grants no more than the limit in all, so the
 * replicas together never admit more than the limit, and leave unspent at most the leases of
 * replicas that stop drawing (smaller as the limit nears). A request waits for Redis only for
 * the first point of a key's window on its replica (once a minute per key), or when its lease ran
 * out before the next one came back.
 * When Redis is down or slower than REDIS_TIMEOUT_MS, each replica counts in its own memory
 * (fail-open to a local limit, as before: no request fails because of the limiter, reads do not
 * need Redis), and tries Redis again in the background. Null when every limit is off (0).
 */
export const createRateLimiter = (
  redis: Redis,
  prefix: string,
  limits: Pick<ApiConfig, "RATE_LIMIT_PER_MINUTE" | "RATE_LIMIT_STARTS_PER_MINUTE" | "RATE_LIMIT_MESSAGES_PER_MINUTE">,
  opts: { now?: () => number } = {},
): RateLimiter | null => {
  const points: Record<RateBudget, number> = {
    general: limits.RATE_LIMIT_PER_MINUTE,
    starts: limits.RATE_LIMIT_STARTS_PER_MINUTE,
    messages: limits.RATE_LIMIT_MESSAGES_PER_MINUTE,
  };
  if (Object.values(points).every((n) => n <= 0)) return null;
  const now = opts.now ?? Date.now;
  const replicaId = randomUUID();
  const replicasKey = `${prefix}:ratelimit:replicas`;
  const counts = new Map<string, Count>();
  /** Redis answered the last reservation: points come from leases. */
  let shared = true;
  let lastTry = 0;

  // Known as a live replica from the start, so the first leases of the others are sized for it.
  const announce = () =>
    void redis
      .pipeline()
      .zadd(replicasKey, now(), replicaId)
      .pexpire(replicasKey, REPLICA_TTL_MS * 2)
      .exec()
      .catch(() => undefined);
  if (redis.status === "ready") announce();
  else redis.once("ready", announce);

  const countOf = (budget: RateBudget, key: string, window: number): Count => {
    const id = `${budget}:${key}`;
    let c = counts.get(id);
    if (!c || c.window !== window) {
      if (!c) {
        // Windows past are dropped as keys come back; a replica holds the keys of its recent callers.
        for (const [other, o] of counts) if (o.window < window) counts.delete(other);
      }
      c = {
        redisKey: `${prefix}:ratelimit:${budget}:${key}:${window}`,
        window,
        reserved: 0,
        lease: 0,
        lastAsk: 0,
        local: 0,
        pending: null,
      };
      counts.set(id, c);
    }
    return c;
  };

  const withTimeout = <T>(p: Promise<T>): Promise<T> =>
    new Promise<T>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error("redis timeout")), REDIS_TIMEOUT_MS);
      p.then(
        (v) => {
          clearTimeout(timer);
          resolve(v);
        },
        (e) => {
          clearTimeout(timer);
          reject(e);
        },
      );
    });

  /** Reserves this replica's next lease of the count's window; one pipeline, one at a time per count. */
  const reserve = (c: Count, limit: number): Promise<void> => {
    c.pending ??= (async () => {
      lastTry = now();
      if (redis.status !== "ready") {
        shared = false;
        return;
      }
      try {
        const reply = (await withTimeout(
          redis.eval(
            LEASE_SCRIPT,
            2,
            c.redisKey,
            replicasKey,
            limit,
            now(),
            REPLICA_TTL_MS,
            replicaId,
            WINDOW_MS,
          ) as Promise<[number, number]>,
        )) ?? [0, 0];
        const [granted, total] = reply.map(Number) as [number, number];
        if (!Number.isFinite(granted) || !Number.isFinite(total)) throw new Error("no lease");
        c.reserved = Math.max(c.reserved, total);
        c.lease += granted;
        c.lastAsk = Math.max(1, granted);
        shared = true;
      } catch {
        shared = false;
      }
    })().finally(() => {
      c.pending = null;
    });
    return c.pending;
  };

  const draw = async (budget: RateBudget, key: string): Promise<Verdict | null> => {
    const limit = points[budget];
    if (limit <= 0) return null;
    const t = now();
    const window = Math.floor(t / WINDOW_MS);
    const c = countOf(budget, key, window);
    const room = () => c.reserved < limit;
    if (shared) {
      // Waited for only when this replica has no point of the key left and Redis may have some
      // (again, a few times, when requests waiting with this one took the whole lease).
      for (let i = 0; i < 3 && shared && c.lease === 0 && (c.lastAsk === 0 || room()); i++) await reserve(c, limit);
    } else if (t - lastTry >= RETRY_MS) {
      void reserve(c, limit);
    }
    const resetSeconds = Math.max(1, Math.ceil(((window + 1) * WINDOW_MS - t) / 1000));
    let allowed: boolean;
    let remaining: number;
    if (shared && c.lastAsk > 0) {
      allowed = c.lease > 0;
      if (allowed) c.lease--;
      remaining = limit - (Math.min(c.reserved, limit) - c.lease);
      // The next lease, asked for before this one runs out: no request waits for it.
      if (c.lease <= c.lastAsk / 2 && room() && !c.pending) void reserve(c, limit);
    } else {
      allowed = c.local < limit;
      remaining = limit - c.local - (allowed ? 1 : 0);
    }
    if (allowed) c.local++;
    return { budget, limit, remaining: Math.max(0, remaining), resetSeconds, refused: !allowed };
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

/** The key a principal's budgets are counted under (a session key counts as its own). */
export const rateKeyOf = (p: Principal): string =>
  p.kind === "api_key" ? `key:${p.keyId}` : `session:${p.conversationId}`;

const keyOf = (c: Context<AuthEnv>): string => rateKeyOf(c.get("principal"));

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
