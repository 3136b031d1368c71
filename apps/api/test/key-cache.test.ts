import { createHash } from "node:crypto";
import { hashApiKey } from "@tern/core";
import { apiKeysRepository } from "@tern/db";
import { createRedis } from "@tern/queue";
import { issueApiKey } from "@tern/services";
import { freePort, testRedisUrl, waitFor } from "@tern/testing";
import type { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createApp } from "../src/app.ts";
import { createKeyCache, type KeyCache } from "../src/middleware/key-cache.ts";
import { startTestApi, type TestApi } from "./harness.ts";

// The bound we hold to: a key revoked on one replica is refused by every other within this.
const INVALIDATION_BOUND_MS = 100;
const TTL_MS = 60_000;

let api: TestApi;
const opened: { redis: Redis; cache: KeyCache }[] = [];

/** One API replica: its own Redis connections and key cache, the shared database and prefix. */
const replica = (opts: { reconnectAfterMs?: number } = {}) => {
  const { reconnectAfterMs } = opts;
  const redis = createRedis(
    testRedisUrl(),
    "producer",
    reconnectAfterMs === undefined ? {} : { retryStrategy: () => reconnectAfterMs },
  );
  const cache = createKeyCache({ redis, prefix: api.prefix, ttlMs: TTL_MS, logger: api.logger });
  opened.push({ redis, cache });
  const app = createApp({
    config: api.config,
    db: api.database.db,
    redis,
    queues: api.queues,
    logger: api.logger,
    secretBox: api.secretBox,
    keyUsage: api.keyUsage,
    keyCache: cache,
    sandboxEvents: api.sandboxEvents,
    workerAccess: api.workerAccess,
    rateLimiter: null,
  });
  const get = (key: string) =>
    app.request("/api/v1/app-conversations/search", { headers: { authorization: `Bearer ${key}` } });
  return { app, cache, get };
};
type Replica = ReturnType<typeof replica>;

const live = (r: Replica) => waitFor(() => r.cache.live, { what: "the key cache to subscribe", timeoutMs: 10_000 });

/** `key` answers 200 on `r`, and the second time from the cache (no database lookup). */
const cachedOn = async (r: Replica, key: string) => {
  expect((await r.get(key)).status).toBe(200);
  const hits = r.cache.stats.hits;
  expect((await r.get(key)).status).toBe(200);
  expect(r.cache.stats.hits).toBe(hits + 1);
};

const secondKey = async (userId: string, expiresAt?: string) =>
  issueApiKey({ db: api.database.db, maxKeyLifetimeDays: api.config.API_KEY_MAX_LIFETIME_DAYS }, userId, {
    expiresAt: expiresAt ?? null,
  });

beforeAll(async () => {
  api = await startTestApi();
});
afterAll(async () => {
  for (const { cache, redis } of opened) {
    await cache.close();
    redis.disconnect();
  }
  await api?.close();
});

describe("API key cache across replicas", () => {
  it("a key revoked through replica A is refused by replica B within 100 ms, though B had it cached", async () => {
    const a = replica();
    const b = replica();
    await Promise.all([live(a), live(b)]);
    const { key: ownerKey, userId } = await api.newUser();
    const victim = await secondKey(userId);
    await cachedOn(a, victim.key);
    await cachedOn(b, victim.key);

    // Timed from the revocation's start (the request that revokes it, its database write and its
    // publish included) to B's cache dropping the key (what the channel bounds), not to B's next
    // request, which then costs a database lookup like any uncached key. B only learns of it by
    // the credential channel: its entry would otherwise live TTL_MS more. B is watched while A works.
    const hash = hashApiKey(victim.key);
    const started = performance.now();
    const dropped = waitFor(() => (b.cache.get(hash) === undefined ? performance.now() : false), {
      what: "replica B to drop the revoked key",
      timeoutMs: 5_000,
      intervalMs: 1,
      inProcess: true,
    });
    const revoked = await a.app.request(`/api/keys/${victim.apiKey.id}`, {
      method: "DELETE",
      headers: { authorization: `Bearer ${ownerKey}` },
    });
    expect(revoked.status).toBe(200);
    const tookMs = (await dropped) - started;
    console.log(`key revocation reached replica B's cache ${tookMs.toFixed(1)} ms after the request began`);
    // The bound as written: a request, a database write and a publish, all in-process and on
    // Postgres and Redis, none of it Docker's (TERN_TEST_TIME_SCALE stretches only Docker's deadlines).
    expect(tookMs).toBeLessThan(INVALIDATION_BOUND_MS);
    expect((await b.get(victim.key)).status).toBe(401);
    // The revoking replica refuses it too.
    expect((await a.get(victim.key)).status).toBe(401);
    // The owner's other key is untouched, and still cached.
    await cachedOn(b, ownerKey);
  });

  it("a cached key fails at its expires_at, from the cache", async () => {
    const r = replica();
    await live(r);
    const { userId } = await api.newUser();
    const short = await secondKey(userId, new Date(Date.now() + 1_500).toISOString());
    await cachedOn(r, short.key);
    const { hits, misses } = r.cache.stats;
    await waitFor(async () => (await r.get(short.key)).status === 401, {
      what: "the expired key to be refused",
      timeoutMs: 10_000,
      intervalMs: 20,
    });
    // Refused by the cache's own expires_at: it never missed (a miss would be a database lookup).
    expect(r.cache.stats.hits).toBeGreaterThan(hits);
    expect(r.cache.stats.misses).toBe(misses);
  });

  it("drops every entry and bypasses itself while its subscription is down, and caches again once back", async () => {
    // Slow to reconnect, so the test sees the cache while its connection is down.
    const r = replica({ reconnectAfterMs: 3_000 });
    await live(r);
    const { key, userId } = await api.newUser();
    await cachedOn(r, key);
    const keyId = (await apiKeysRepository(api.database.db).findLiveByHash(hashApiKey(key)))?.key.id ?? "";
    // Revoked behind the cache's back (no publish), as a message lost with the connection would be:
    // the cache still serves it, which is why it must not survive a lost subscription.
    expect(await apiKeysRepository(api.database.db).revoke(userId, keyId)).toBe(true);
    expect((await r.get(key)).status).toBe(200);

    const admin = createRedis(testRedisUrl(), "worker");
    try {
      // Every key cache of this file's prefix (their connections share its name), r's among them.
      const list = String(await admin.client("LIST"));
      const ids = list
        .split("\n")
        .filter((l) => l.includes(` name=${api.prefix}:key-cache `))
        .map((l) => /\bid=(\d+)/.exec(l)?.[1] ?? "");
      expect(ids.length).toBeGreaterThan(0);
      for (const id of ids) await admin.client("KILL", "ID", id);
    } finally {
      admin.disconnect();
    }
    await waitFor(() => !r.cache.live, {
      what: "the cache to see its connection drop",
      timeoutMs: 10_000,
      intervalMs: 5,
    });
    expect(r.cache.size).toBe(0);
    expect((await r.get(key)).status).toBe(401);

    // Back and subscribed: a live key is cached again.
    await live(r);
    const { key: other } = await api.newUser();
    await cachedOn(r, other);
  });
});

describe("key cache without its subscription", () => {
  const entry = { keyId: "k", userId: "u", isAdmin: false, expiresAtMs: null };
  const hash = createHash("sha256").update("some key").digest("hex");

  it("serves nothing and keeps nothing while it was never subscribed (Redis unreachable)", async () => {
    const dead = createRedis(`redis://127.0.0.1:${await freePort()}`, "producer", { lazyConnect: true });
    const cache = createKeyCache({ redis: dead, prefix: api.prefix, ttlMs: TTL_MS, logger: api.logger });
    try {
      expect(cache.live).toBe(false);
      cache.set(hash, entry, cache.epoch);
      expect(cache.get(hash)).toBeUndefined();
      expect(cache.size).toBe(0);
    } finally {
      await cache.close();
      dead.disconnect();
    }
  });

  it("keeps no lookup that an invalidation overtook", async () => {
    const r = replica();
    await live(r);
    const before = r.cache.epoch;
    await r.cache.publish({ userId: "someone" });
    r.cache.set(hash, entry, before);
    expect(r.cache.get(hash)).toBeUndefined();
    r.cache.set(hash, entry, r.cache.epoch);
    expect(r.cache.get(hash)).toMatchObject({ keyId: "k" });
  });
});
