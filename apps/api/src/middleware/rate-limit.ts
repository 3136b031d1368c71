import { randomUUID } from "node:crypto";
import { RateLimitedError } from "@tern/core";
import type { Context } from "hono";
import { createMiddleware } from "hono/factory";
import type { Redis } from "ioredis";
import type { ApiConfig } from "../config.ts";
import type { AuthEnv } from "./auth.ts";

/** The budgets a request may draw on: every request the general one, starts and messages theirs too. */
export type RateBudget = "general" | "starts" | "messages";

const STARTS: RegExp[] = [/^\/api\/v1\/app-conversations\/?$/, /^\/api\/v1\/app-conversations\/stream-start\/?$/];
const MESSAGES: RegExp[] = [
  /^\/api\/v1\/app-conversations\/[^/]+\/send-message\/?$/,
  /^\/api\/v1\/conversation\/[^/]+\/events\/?$/,
  /^\/api\/v1\/conversations\/[^/]+\/pending-messages\/?$/,
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
/** How often each replica reconciles its counts with Redis. */
const SYNC_INTERVAL_MS = 100;
/** Past this, a slow Redis counts as down for the limiter (no request is held up for it longer). */
const REDIS_TIMEOUT_MS = 500;
/** A replica not heard from for this long no longer takes a share of the budgets. */
const REPLICA_TTL_MS = 5_000;

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
  /** Stops the background reconciliation (what it has not sent yet is dropped). */
  close(): void;
}

/** One key's budget in this replica, for the current window. */
interface Count {
  redisKey: string;
  window: number;
  /** The count in Redis as of the last reconciliation (this replica's part of it included). */
  known: number;
  /** Points this replica drew since, not yet added in Redis. */
  unsynced: number;
  /** Points this replica drew in the window: what it goes by alone while Redis is down. */
  local: number;
  /** Redis has answered for this count in this window at least once. */
  synced: boolean;
  /** A reconciliation of this count under way, awaited by a request that needs it. */
  inline: Promise<void> | null;
}

/**
 * Fixed one-minute windows per key (aligned to the minute), counted locally in each API replica
 * and reconciled with Redis in the background: a request costs no Redis round trip. Every
 * SYNC_INTERVAL_MS each replica adds what it drew to the key's counter in Redis (one pipeline for
 * all its keys, INCRBY under `REDIS_PREFIX:ratelimit:`) and reads back the total, and registers
 * itself as a live replica. Between two reconciliations a replica spends at most its share of what
 * was left, `ceil((limit - known) / replicas)`, so the replicas together overshoot a limit by at
 * most one point each however the load is spread. A request waits for Redis only when its replica
 * has not yet counted the key in this window (once a minute per key), or has spent its share (at
 * the edge of the limit): then one reconciliation, shared by the requests that need it.
 * When Redis is down or slower than REDIS_TIMEOUT_MS, each replica counts in its own memory
 * (fail-open to a local limit, as before: no request fails because of the limiter, reads do not
 * need Redis) until Redis answers again. Null when every limit is off (0).
 */
export const createRateLimiter = (
  redis: Redis,
  prefix: string,
  limits: Pick<ApiConfig, "RATE_LIMIT_PER_MINUTE" | "RATE_LIMIT_STARTS_PER_MINUTE" | "RATE_LIMIT_MESSAGES_PER_MINUTE">,
  opts: { syncIntervalMs?: number; now?: () => number } = {},
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
  let replicas = 1;
  /** Redis answered the last reconciliation: shares are taken from the shared count. */
  let shared = true;

  const countOf = (budget: RateBudget, key: string, window: number): Count => {
    const id = `${budget}:${key}`;
    let c = counts.get(id);
    if (!c || c.window !== window) {
      c = {
        redisKey: `${prefix}:ratelimit:${budget}:${key}:${window}`,
        window,
        known: 0,
        unsynced: 0,
        local: 0,
        synced: false,
        inline: null,
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

  /** Adds what the given counts drew to Redis and reads the totals back; one pipeline. */
  const reconcile = async (list: Count[]): Promise<void> => {
    if (redis.status !== "ready") {
      shared = false;
      return;
    }
    const t = now();
    const pipeline = redis.pipeline();
    pipeline.zadd(replicasKey, t, replicaId);
    pipeline.zremrangebyscore(replicasKey, "-inf", t - REPLICA_TTL_MS);
    pipeline.zcard(replicasKey);
    pipeline.pexpire(replicasKey, REPLICA_TTL_MS * 2);
    const sent = list.map((c) => {
      pipeline.incrby(c.redisKey, c.unsynced);
      pipeline.pexpire(c.redisKey, WINDOW_MS * 2);
      return c.unsynced;
    });
    try {
      const replies = (await withTimeout(pipeline.exec())) ?? [];
      for (const [err] of replies) if (err) throw err;
      replicas = Math.max(1, Number(replies[2]?.[1] ?? 1));
      for (const [i, c] of list.entries()) {
        c.known = Number(replies[4 + 2 * i]?.[1] ?? c.known);
        c.unsynced -= sent[i] ?? 0;
        c.synced = true;
      }
      shared = true;
    } catch {
      // Not added: kept in `unsynced` for the next reconciliation. Meanwhile, local counts.
      shared = false;
    }
  };

  let background: Promise<void> | null = null;
  const tick = () => {
    if (background) return;
    const window = Math.floor(now() / WINDOW_MS);
    for (const [id, c] of counts) if (c.window < window) counts.delete(id);
    const list = [...counts.values()];
    if (list.length === 0) return;
    background = reconcile(list).finally(() => {
      background = null;
    });
  };
  const timer = setInterval(tick, opts.syncIntervalMs ?? SYNC_INTERVAL_MS);
  timer.unref();

  /** One reconciliation of this count, shared by the requests waiting for it. */
  const reconcileNow = (c: Count): Promise<void> => {
    c.inline ??= reconcile([c]).finally(() => {
      c.inline = null;
    });
    return c.inline;
  };

  const draw = async (budget: RateBudget, key: string): Promise<Verdict | null> => {
    const limit = points[budget];
    if (limit <= 0) return null;
    const t = now();
    const window = Math.floor(t / WINDOW_MS);
    const c = countOf(budget, key, window);
    const share = () => Math.ceil((limit - c.known) / replicas);
    // Reconciled in the request only for a key this replica has not counted in this window, or
    // whose share it has spent while the last count left room (past the limit, counts only grow).
    if (shared && (!c.synced || (c.unsynced >= share() && c.known + c.unsynced < limit))) await reconcileNow(c);
    const resetSeconds = Math.max(1, Math.ceil(((window + 1) * WINDOW_MS - t) / 1000));
    const used = shared && c.synced ? c.known + c.unsynced : c.local;
    const allowed = shared && c.synced ? used < limit && c.unsynced < share() : used < limit;
    if (allowed) {
      c.unsynced++;
      c.local++;
    }
    return {
      budget,
      limit,
      remaining: Math.max(0, limit - used - (allowed ? 1 : 0)),
      resetSeconds,
      refused: !allowed,
    };
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
    close() {
      clearInterval(timer);
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
