import type { AddressInfo } from "node:net";
import { serve } from "@hono/node-server";
import { createLogger, type Logger, type SecretBox } from "@tern/core";
import { apiKeysRepository } from "@tern/db";
import { createQueueEvents, createQueues, createRedis, QueueName, type Queues } from "@tern/queue";
import { createUserWithKey, resolveInternalToken } from "@tern/services";
import {
  createRedisPrefix,
  createTestDatabase,
  deleteRedisPrefix,
  type TestDatabase,
  tenancyLimitsOff,
  testRedisUrl,
  testSecretBox,
} from "@tern/testing";
import type { Redis } from "ioredis";
import { createApp } from "../src/app.ts";
import { loadApiConfig } from "../src/config.ts";
import type { ApiDeps } from "../src/deps.ts";
import { createKeyUsage, type KeyUsage } from "../src/middleware/key-usage.ts";

/** The API served over real HTTP in this process, with its own database and Redis prefix. */
export interface TestApi {
  url: string;
  app: ReturnType<typeof createApp>;
  /** What createApp was given, for a test that builds an app of its own beside it. */
  config: ApiDeps["config"];
  logger: Logger;
  secretBox: SecretBox;
  database: TestDatabase;
  queues: Queues;
  redis: Redis;
  prefix: string;
  keyUsage: KeyUsage;
  /** For a test that builds an app of its own on this one's resources. */
  sandboxEvents: ApiDeps["sandboxEvents"];
  workerAccess: ApiDeps["workerAccess"];
  /** A new user with one key; returns the key and the user id. */
  newUser: (opts?: { admin?: boolean; expiresAt?: string | null }) => Promise<{ key: string; userId: string }>;
  /** fetch against the API with `key` as a Bearer token (or the headers given). */
  call: (path: string, init?: RequestInit & { key?: string; json?: unknown }) => Promise<Response>;
  close: () => Promise<void>;
}

/**
 * `env` goes on top of the test defaults, where every tenancy limit is off (tenancyLimitsOff): a
 * test of a limit turns it on.
 */
export const startTestApi = async (
  opts: { keyUsageIntervalMs?: number; sandboxCommandTimeoutMs?: number; env?: Record<string, string> } = {},
): Promise<TestApi> => {
  const database = await createTestDatabase();
  const prefix = createRedisPrefix();
  const redis = createRedis(testRedisUrl(), "producer");
  const queues = createQueues(redis, prefix);
  const logger = createLogger("api-test", "silent");
  const config = loadApiConfig({ DATABASE_URL: database.url, REDIS_PREFIX: prefix, ...tenancyLimitsOff, ...opts.env });
  const keyUsage = createKeyUsage(apiKeysRepository(database.db), logger, opts.keyUsageIntervalMs ?? 5_000);
  const publicUrl = "http://api.test";
  const appConfig = { ...config, publicUrl, cursorSecret: "test-cursor-secret-0123456789" };
  const sandboxEvents = createQueueEvents(testRedisUrl(), prefix, QueueName.Sandbox);
  const secretBox = testSecretBox();
  const workerAccess = { prefix, token: await resolveInternalToken(database.db, undefined) };
  const app = createApp({
    config: appConfig,
    db: database.db,
    redis,
    queues,
    logger,
    secretBox,
    keyUsage,
    sandboxEvents: sandboxEvents.events,
    workerAccess,
    sandboxCommandTimeoutMs: opts.sandboxCommandTimeoutMs,
  });
  const server = serve({ fetch: app.fetch, port: 0, hostname: "127.0.0.1" });
  await new Promise<void>((resolve) => server.once("listening", () => resolve()));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

  const newUser = (o: { admin?: boolean; expiresAt?: string | null } = {}) =>
    createUserWithKey(
      { db: database.db, maxKeyLifetimeDays: config.API_KEY_MAX_LIFETIME_DAYS },
      { name: "test", ...o },
    );

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
    config: appConfig,
    logger,
    secretBox,
    database,
    queues,
    redis,
    prefix,
    keyUsage,
    sandboxEvents: sandboxEvents.events,
    workerAccess,
    newUser,
    call,
    close: async () => {
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await keyUsage.stop();
      await sandboxEvents.close();
      await queues.close();
      redis.disconnect();
      await database.drop();
      await deleteRedisPrefix(prefix);
    },
  };
};
