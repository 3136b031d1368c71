import { createLogger } from "@tern/core";
import { startTasksRepository, usersRepository } from "@tern/db";
import { createQueues, createRedis } from "@tern/queue";
import type { SandboxDriver } from "@tern/sandbox";
import { startConversation } from "@tern/services";
import {
  createRedisPrefix,
  createTestDatabase,
  deleteRedisPrefix,
  prepareTestSandboxes,
  removeSandboxesOfNamespace,
  sandboxesOfNamespace,
  type TestDatabase,
  testRedisUrl,
  testSandboxDriver,
  testSandboxNetworkName,
  testSecretBox,
  waitFor,
} from "@tern/testing";
import type { Worker } from "bullmq";
import type { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadWorkerConfig } from "../src/config.ts";
import type { WorkerDeps } from "../src/deps.ts";
import { startWorkers } from "../src/workers.ts";

// In-process worker with a sandbox driver that fails on demand: passing faults are retried.
let database: TestDatabase;
let redis: Redis;
let prefix: string;
let workers: Worker[];
let deps: WorkerDeps;
const faults = { createFailures: 0, failInit: false };

beforeAll(async () => {
  database = await createTestDatabase();
  prefix = createRedisPrefix();
  redis = createRedis(testRedisUrl(), "worker");
  // A producer refuses to add jobs until its connection is ready (startConversation fails fast).
  await redis.ping();
  const real = testSandboxDriver();
  await prepareTestSandboxes(real);
  const flaky: SandboxDriver = {
    ...real,
    async create(spec) {
      if (faults.createFailures > 0) {
        faults.createFailures--;
        throw new Error("connect ECONNRESET /var/run/docker.sock");
      }
      return real.create(spec);
    },
    async exec(id, opts) {
      if (faults.failInit && opts.cmd.join(" ").includes("git init")) throw new Error("socket hang up");
      return real.exec(id, opts);
    },
  };
  const config = loadWorkerConfig({
    DATABASE_URL: database.url,
    REDIS_URL: testRedisUrl(),
    REDIS_PREFIX: prefix,
    SANDBOX_NETWORK: testSandboxNetworkName(),
    SANDBOX_POOL_SIZE: "0",
    SANDBOX_MEMORY_MB: "256",
  });
  deps = {
    config,
    db: database.db,
    redis,
    queues: createQueues(redis, prefix),
    sandboxes: flaky,
    engineId: null,
    pool: null,
    logger: createLogger("worker-test", "silent"),
    secretBox: testSecretBox(),
  };
  workers = startWorkers(deps);
});

afterAll(async () => {
  await Promise.all(workers.map((w) => w.close()));
  await deps.queues.close();
  await removeSandboxesOfNamespace(prefix);
  expect(await sandboxesOfNamespace(prefix)).toEqual([]);
  redis.disconnect();
  await deleteRedisPrefix(prefix);
  await database.drop();
});

const start = async (): Promise<string> => {
  const user = await usersRepository(database.db).create();
  const task = await startConversation(deps, user.id, {});
  return task.id;
};

const finished = (id: string, timeoutMs = 30_000) =>
  waitFor(
    async () => {
      const task = await startTasksRepository(database.db).get(id);
      return (task?.status === "READY" || task?.status === "ERROR") && task;
    },
    { what: `task ${id} to end READY or ERROR`, timeoutMs },
  );

describe("passing faults", () => {
  it("are retried with backoff, and the start still ends READY (a later attempt owns it)", async () => {
    faults.createFailures = 2;
    const task = await finished(await start());
    expect(task).toMatchObject({ status: "READY", detail: null, attempt: 3 });
    expect(faults.createFailures).toBe(0);
  });

  it("that persist through every attempt end the task in ERROR, naming the stage, with the container removed", async () => {
    faults.failInit = true;
    try {
      const id = await start();
      const task = await finished(id);
      expect(task.status).toBe("ERROR");
      expect(task.detail).toBe(
        "PREPARING_REPOSITORY: the sandbox could not be prepared (a temporary fault persisted through 5 attempts); try again later",
      );
      expect(task.attempt).toBe(5);
      // Removed before the task said ERROR.
      const left = await sandboxesOfNamespace(prefix);
      expect(left.filter((c) => c.labels["tern.task_id"] === id)).toEqual([]);
    } finally {
      faults.failInit = false;
    }
  });
});
