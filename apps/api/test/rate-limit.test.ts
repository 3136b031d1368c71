import { createRedis } from "@tern/queue";
import { issueApiKey } from "@tern/services";
import { createConversationFixture, freePort, testRedisUrl, waitFor } from "@tern/testing";
import type { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createApp } from "../src/app.ts";
import { budgetOf, createRateLimiter, type RateLimiter } from "../src/middleware/rate-limit.ts";
import { startTestApi, type TestApi } from "./harness.ts";

/** Per-key rate limits, counted in Redis: a general budget, and stricter ones for starts and messages. */
let api: TestApi;

const GENERAL = 8;
const STARTS = 2;
const MESSAGES = 3;

beforeAll(async () => {
  api = await startTestApi({
    env: {
      RATE_LIMIT_PER_MINUTE: String(GENERAL),
      RATE_LIMIT_STARTS_PER_MINUTE: String(STARTS),
      RATE_LIMIT_MESSAGES_PER_MINUTE: String(MESSAGES),
    },
  });
});
afterAll(async () => api?.close());

const limitHeaders = (res: Response) => ({
  limit: res.headers.get("ratelimit-limit"),
  remaining: res.headers.get("ratelimit-remaining"),
  reset: Number(res.headers.get("ratelimit-reset")),
});

const search = (key: string) => api.call("/api/v1/app-conversations/search", { key });
const start = (key: string) => api.call("/api/v1/app-conversations", { method: "POST", key, json: {} });

describe("the general budget", () => {
  it("answers with the RateLimit headers, then 429 with Retry-After once the key spent it", async () => {
    const { key } = await api.newUser();
    for (let i = 1; i <= GENERAL; i++) {
      const res = await search(key);
      expect(res.status).toBe(200);
      const h = limitHeaders(res);
      expect(h).toMatchObject({ limit: String(GENERAL), remaining: String(GENERAL - i) });
      expect(h.reset).toBeGreaterThan(0);
      expect(h.reset).toBeLessThanOrEqual(60);
    }
    const refused = await search(key);
    expect(refused.status).toBe(429);
    const retryAfter = Number(refused.headers.get("retry-after"));
    expect(retryAfter).toBeGreaterThan(0);
    expect(retryAfter).toBeLessThanOrEqual(60);
    expect(limitHeaders(refused)).toMatchObject({ limit: String(GENERAL), remaining: "0" });
    const body = (await refused.json()) as { error: { code: string; message: string }; detail: string };
    expect(body.error.code).toBe("rate_limited");
    expect(body.detail).toMatch(/at most 8 requests per minute/);
  });

  it("is each key's own: another key of the same user still has its budget", async () => {
    const { key, userId } = await api.newUser();
    const second = await issueApiKey({ db: api.database.db, maxKeyLifetimeDays: 1 }, userId, { name: "second" });
    for (let i = 0; i < GENERAL; i++) await search(key);
    expect((await search(key)).status).toBe(429);
    const other = await search(second.key);
    expect(other.status).toBe(200);
    expect(limitHeaders(other).remaining).toBe(String(GENERAL - 1));
  });

  it("counts in Redis under the deployment's prefix, so every API replica shares it", async () => {
    const { key } = await api.newUser();
    await search(key);
    const keys = await api.redis.keys(`${api.prefix}:ratelimit:general:*`);
    expect(keys.length).toBeGreaterThan(0);
  });
});

describe("starts and messages", () => {
  it("refuses starts past their own, stricter budget while reads still pass", async () => {
    const { key } = await api.newUser();
    for (let i = 1; i <= STARTS; i++) {
      const res = await start(key);
      expect(res.status).toBe(200);
      expect(limitHeaders(res)).toMatchObject({ limit: String(STARTS), remaining: String(STARTS - i) });
    }
    const refused = await start(key);
    expect(refused.status).toBe(429);
    expect(Number(refused.headers.get("retry-after"))).toBeGreaterThan(0);
    expect(((await refused.json()) as { detail: string }).detail).toMatch(/at most 2 starts per minute/);
    // The general budget is not spent: a read passes, and says what is left of it.
    const read = await search(key);
    expect(read.status).toBe(200);
    expect(limitHeaders(read)).toMatchObject({ limit: String(GENERAL), remaining: String(GENERAL - STARTS - 2) });
  });

  it("refuses messages to the agent past their budget", async () => {
    const { key, userId } = await api.newUser();
    const { conversationId } = await createConversationFixture(api.database.db, { userId });
    const send = () =>
      api.call(`/api/v1/conversation/${conversationId}/events`, {
        method: "POST",
        key,
        json: { role: "user", content: [{ type: "text", text: "hi" }] },
      });
    for (let i = 0; i < MESSAGES; i++) expect((await send()).status).toBe(200);
    const refused = await send();
    expect(refused.status).toBe(429);
    expect(((await refused.json()) as { detail: string }).detail).toMatch(/at most 3 messages per minute/);
  });

  it("draws a sandbox made on its own (POST /api/v1/sandboxes) on the starts budget", async () => {
    const { key } = await api.newUser();
    const make = () => api.call("/api/v1/sandboxes", { method: "POST", key });
    for (let i = 1; i <= STARTS; i++) {
      const res = await make();
      expect(res.status, await res.clone().text()).toBe(200);
      expect(limitHeaders(res)).toMatchObject({ limit: String(STARTS), remaining: String(STARTS - i) });
    }
    const refused = await make();
    expect(refused.status).toBe(429);
    expect(((await refused.json()) as { detail: string }).detail).toMatch(/at most 2 starts per minute/);
  });

  it("knows the start and message routes by path, those of later routes included", () => {
    expect(budgetOf("POST", "/api/v1/app-conversations")).toBe("starts");
    expect(budgetOf("POST", "/api/v1/app-conversations/stream-start")).toBe("starts");
    expect(budgetOf("POST", "/api/v1/sandboxes")).toBe("starts");
    expect(budgetOf("POST", "/api/v1/app-conversations/abc/send-message")).toBe("messages");
    expect(budgetOf("POST", "/api/v1/conversation/abc/events")).toBe("messages");
    expect(budgetOf("POST", "/api/v1/conversations/task-abc/pending-messages")).toBe("messages");
    expect(budgetOf("GET", "/api/v1/app-conversations")).toBeNull();
    expect(budgetOf("POST", "/api/v1/conversation/abc/pause")).toBeNull();
  });
});

describe("with Redis down", () => {
  it("neither fails requests nor stops limiting: each replica counts in its own memory", async () => {
    // A connection to a port where nothing listens: never ready, as the producer's is while Redis is down.
    const deadRedis = createRedis(`redis://127.0.0.1:${await freePort()}`, "producer", {
      retryStrategy: () => null,
      lazyConnect: true,
    });
    const app = createApp({
      config: api.config,
      db: api.database.db,
      redis: deadRedis,
      queues: api.queues,
      logger: api.logger,
      secretBox: api.secretBox,
      keyUsage: api.keyUsage,
      sandboxEvents: api.sandboxEvents,
      workerAccess: api.workerAccess,
    });
    const { key } = await api.newUser();
    const get = () => app.request("/api/v1/app-conversations/search", { headers: { authorization: `Bearer ${key}` } });
    for (let i = 1; i <= GENERAL; i++) {
      const res = await get();
      expect(res.status).toBe(200);
      expect(res.headers.get("ratelimit-remaining")).toBe(String(GENERAL - i));
    }
    const refused = await get();
    expect(refused.status).toBe(429);
    expect(refused.headers.get("retry-after")).not.toBeNull();
    deadRedis.disconnect();
  });
});

describe("across API replicas", () => {
  /** A clock 1 s into a one-minute window, so the whole test counts in one window. */
  const windowClock = () => {
    const start = Date.now();
    const base = Math.floor(start / 60_000) * 60_000 + 1_000;
    return () => base + (Date.now() - start);
  };
  /** An ioredis client that counts the round trips (pipelines, scripts) sent through it. */
  const countingRedis = () => {
    const redis = createRedis(testRedisUrl(), "producer");
    const sent = { roundTrips: 0 };
    const pipeline = redis.pipeline.bind(redis);
    redis.pipeline = ((...args: Parameters<Redis["pipeline"]>) => {
      sent.roundTrips++;
      return pipeline(...args);
    }) as Redis["pipeline"];
    const evalScript = redis.eval.bind(redis);
    redis.eval = ((...args: Parameters<typeof evalScript>) => {
      sent.roundTrips++;
      return evalScript(...args);
    }) as typeof redis.eval;
    return { redis, sent };
  };
  const replicaApp = (redis: Redis, limiter: RateLimiter | null) =>
    createApp({
      config: api.config,
      db: api.database.db,
      redis,
      queues: api.queues,
      logger: api.logger,
      secretBox: api.secretBox,
      keyUsage: api.keyUsage,
      sandboxEvents: api.sandboxEvents,
      workerAccess: api.workerAccess,
      rateLimiter: limiter,
    });

  it("holds a key's limit within 10 % when 4 replicas serve it at once", async () => {
    const LIMIT = 100;
    const now = windowClock();
    const prefix = `${api.prefix}:replicas-${Date.now()}`;
    const replicas = Array.from({ length: 4 }, () => {
      const { redis, sent } = countingRedis();
      const limiter = createRateLimiter(
        redis,
        prefix,
        { RATE_LIMIT_PER_MINUTE: LIMIT, RATE_LIMIT_STARTS_PER_MINUTE: 0, RATE_LIMIT_MESSAGES_PER_MINUTE: 0 },
        { now },
      );
      return { redis, sent, limiter, app: replicaApp(redis, limiter), admitted: 0, refused: 0 };
    });
    try {
      // The 4 replicas up and known to each other, as a deployment's are.
      await waitFor(async () => (await api.redis.zcard(`${prefix}:ratelimit:replicas`)) === 4, {
        what: "the 4 replicas to announce themselves",
      });
      const { key } = await api.newUser();
      // 3 × the limit, 8 at a time on each replica, each request on the next replica in turn.
      let next = 0;
      const total = 3 * LIMIT;
      await Promise.all(
        Array.from({ length: 32 }, async (_, lane) => {
          const r = replicas[lane % 4] as (typeof replicas)[number];
          while (next < total) {
            next++;
            const res = await r.app.request("/api/v1/app-conversations/search", {
              headers: { authorization: `Bearer ${key}` },
            });
            if (res.status === 200) r.admitted++;
            else if (res.status === 429) r.refused++;
            else throw new Error(`unexpected ${res.status}`);
          }
        }),
      );
      const admitted = replicas.reduce((n, r) => n + r.admitted, 0);
      expect(admitted).toBeGreaterThanOrEqual(0.9 * LIMIT);
      expect(admitted).toBeLessThanOrEqual(1.1 * LIMIT);
      // Every replica served some of it: the budget was shared, not one replica's alone.
      for (const r of replicas) expect(r.admitted).toBeGreaterThan(0);
      expect(replicas.reduce((n, r) => n + r.refused, 0)).toBe(total - admitted);
    } finally {
      for (const r of replicas) {
        r.redis.disconnect();
      }
    }
  });

  it("costs no Redis round trip per request: one lease, then points from memory", async () => {
    const { redis, sent } = countingRedis();
    // A lease of half the limit at first (one replica): 50 requests spend it from memory.
    const prefix = `${api.prefix}:quiet-${Date.now()}`;
    const limiter = createRateLimiter(
      redis,
      prefix,
      { RATE_LIMIT_PER_MINUTE: 600, RATE_LIMIT_STARTS_PER_MINUTE: 0, RATE_LIMIT_MESSAGES_PER_MINUTE: 0 },
      { now: windowClock() },
    );
    try {
      await waitFor(async () => (await api.redis.zcard(`${prefix}:ratelimit:replicas`)) === 1, {
        what: "the replica to announce itself",
      });
      const before = sent.roundTrips;
      const { key } = await api.newUser();
      for (let i = 1; i <= 50; i++) {
        const v = await limiter?.check(`key:${key}`, null);
        expect(v).toMatchObject({ refused: false, remaining: 600 - i });
      }
      expect(sent.roundTrips - before).toBe(1);
    } finally {
      redis.disconnect();
    }
  });
});
