import type { AddressInfo } from "node:net";
import { serve } from "@hono/node-server";
import { createLogger, type Logger, type Resolver, type SecretBox } from "@tern/core";
import { apiKeysRepository } from "@tern/db";
import { createQueueEvents, QueueName, type Queues } from "@tern/queue";
import { resolveInternalToken } from "@tern/services";
import {
  type ApiClient,
  type StackOptions,
  startStack,
  type TestDatabase,
  type TestStack,
  testRedisUrl,
  testSecretBox,
} from "@tern/testing";
import type { Redis } from "ioredis";
import { createApp } from "../src/app.ts";
import { loadApiConfig } from "../src/config.ts";
import type { ApiDeps } from "../src/deps.ts";
import { createKeyUsage, type KeyUsage } from "../src/middleware/key-usage.ts";

/**
 * The API served over real HTTP in this process, on a test stack (@tern/testing's startStack: its
 * own database and Redis prefix, and the workers, git server and scripted LLM a file asks for).
 */
export interface TestApi {
  url: string;
  app: ReturnType<typeof createApp>;
  /** The stack the API is served on: its worker processes, git server and scripted LLM. */
  stack: TestStack;
  /** What createApp was given, for a test that builds an app of its own on this one's resources. */
  deps: ApiDeps;
  config: ApiDeps["config"];
  logger: Logger;
  secretBox: SecretBox;
  database: TestDatabase;
  queues: Queues;
  redis: Redis;
  prefix: string;
  keyUsage: KeyUsage;
  sandboxEvents: ApiDeps["sandboxEvents"];
  workerAccess: ApiDeps["workerAccess"];
  /** A new user with one key; returns the key and the user id. */
  newUser: TestStack["newUser"];
  /** fetch against the API with `key` as a Bearer token (or the headers given). */
  call: (path: string, init?: RequestInit & { key?: string; json?: unknown }) => Promise<Response>;
  /** A user's client of this API (json, conversation, start, waitForExecution, …). */
  client: (key: string) => ApiClient;
  close: () => Promise<void>;
}

/**
 * `env` goes on top of the test defaults, where every tenancy limit is off (tenancyLimitsOff): a
 * test of a limit turns it on. `worker`, `git` and `llm` are the stack's (startStack).
 */
export const startTestApi = async (
  opts: {
    keyUsageIntervalMs?: number;
    sandboxCommandTimeoutMs?: number;
    env?: Record<string, string>;
    /** Name resolution for the URLs users name (hostsResolver): tests never ask real DNS. */
    resolve?: Resolver;
  } & Pick<StackOptions, "worker" | "git" | "llm" | "workerEnv" | "processTimeoutMs"> = {},
): Promise<TestApi> => {
  const { keyUsageIntervalMs, sandboxCommandTimeoutMs, env, resolve, ...stackOpts } = opts;
  const stack = await startStack({ ...stackOpts, apiEnv: env });
  const { database, prefix, redis, queues } = stack;
  const logger = createLogger("api-test", "silent");
  const config = loadApiConfig(stack.apiEnv());
  const keyUsage = createKeyUsage(apiKeysRepository(database.db), logger, keyUsageIntervalMs ?? 5_000);
  const appConfig = { ...config, publicUrl: "http://api.test", cursorSecret: "test-cursor-secret-0123456789" };
  const sandboxEvents = createQueueEvents(testRedisUrl(), prefix, QueueName.Sandbox);
  const secretBox = testSecretBox();
  const workerAccess = { prefix, token: await resolveInternalToken(database.db, undefined) };
  const deps: ApiDeps = {
    config: appConfig,
    db: database.db,
    redis,
    queues,
    logger,
    secretBox,
    keyUsage,
    sandboxEvents: sandboxEvents.events,
    workerAccess,
    sandboxCommandTimeoutMs,
    ...(resolve ? { resolve } : {}),
  };
  const app = createApp(deps);
  const server = serve({ fetch: app.fetch, port: 0, hostname: "127.0.0.1" });
  await new Promise<void>((resolve) => server.once("listening", () => resolve()));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const anonymous = stack.client("", url);

  return {
    url,
    app,
    stack,
    deps,
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
    newUser: stack.newUser,
    call: anonymous.call,
    client: (key) => stack.client(key, url),
    close: async () => {
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await keyUsage.stop();
      await sandboxEvents.close();
      await stack.close();
    },
  };
};
