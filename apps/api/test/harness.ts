import type { AddressInfo } from "node:net";
import { serve } from "@hono/node-server";
import { createLogger } from "@tern/core";
import { apiKeysRepository } from "@tern/db";
import { createQueues, createRedis, type Queues } from "@tern/queue";
import {
  createRedisPrefix,
  createTestDatabase,
  createUserWithKey,
  deleteRedisPrefix,
  type TestDatabase,
  testRedisUrl,
} from "@tern/testing";
import type { Redis } from "ioredis";
import { createApp } from "../src/app.ts";
import { loadApiConfig } from "../src/config.ts";
import { createKeyUsage, type KeyUsage } from "../src/middleware/key-usage.ts";

/** The API served over real HTTP in this process, with its own database and Redis prefix. */
export interface TestApi {
  url: string;
  app: ReturnType<typeof createApp>;
  database: TestDatabase;
  queues: Queues;
  redis: Redis;
  prefix: string;
  keyUsage: KeyUsage;
  /** A new user with one key; returns the key and the user id. */
  newUser: (opts?: { admin?: boolean; expiresAt?: string | null }) => Promise<{ key: string; userId: string }>;
  /** fetch against the API with `key` as a Bearer token (or the headers given). */
  call: (path: string, init?: RequestInit & { key?: string; json?: unknown }) => Promise<Response>;
  close: () => Promise<void>;
}

export const startTestApi = async (opts: { keyUsageIntervalMs?: number } = {}): Promise<TestApi> => {
  const database = await createTestDatabase();
  const prefix = createRedisPrefix();
  const redis = createRedis(testRedisUrl(), "producer");
  const queues = createQueues(redis, prefix);
  const logger = createLogger("api-test", "silent");
  const config = loadApiConfig({ DATABASE_URL: database.url, REDIS_PREFIX: prefix });
  const keyUsage = createKeyUsage(apiKeysRepository(database.db), logger, opts.keyUsageIntervalMs ?? 5_000);
  const publicUrl = "http://api.test";
  const app = createApp({
    config: { ...config, publicUrl, cursorSecret: "test-cursor-secret-0123456789" },
    db: database.db,
    redis,
    queues,
    logger,
    keyUsage,
  });
  const server = serve({ fetch: app.fetch, port: 0, hostname: "127.0.0.1" });
  await new Promise<void>((resolve) => server.once("listening", () => resolve()));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

  const newUser = (o: { admin?: boolean; expiresAt?: string | null } = {}) => createUserWithKey(database.db, o);

  const call: TestApi["call"] = (path, init = {}) => {
    const { key, json, headers, ...rest } = init;
    const h = new Headers(headers);
    if (key) h.set("authorization", `Bearer ${key}`);
    if (json !== undefined) h.set("content-type", "application/json");
    return fetch(`${url}${path}`, { ...rest, headers: h, body: json !== undefined ? JSON.stringify(json) : rest.body });
  };

  return {
    url,
    app,
    database,
    queues,
    redis,
    prefix,
    keyUsage,
    newUser,
    call,
    close: async () => {
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await keyUsage.stop();
      await queues.close();
      redis.disconnect();
      await database.drop();
      await deleteRedisPrefix(prefix);
    },
  };
};

/** Polls `check` until it holds or `timeoutMs` passes (no fixed sleeps). */
export const eventually = async (check: () => Promise<boolean>, timeoutMs = 10_000, everyMs = 100): Promise<void> => {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error("condition not met in time");
    await new Promise((r) => setTimeout(r, everyMs));
  }
};
