import { createLogger } from "@tern/core";
import { sandboxesRepository, startTasksRepository, usersRepository } from "@tern/db";
import { createQueues, createRedis } from "@tern/queue";
import type { SandboxDriver } from "@tern/sandbox";
import { startConversation } from "@tern/services";
import {
  createRedisPrefix,
  createTestDatabase,
  deleteRedisPrefix,
  prepareTestSandboxes,
  removeSandboxesOfNamespace,
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
import { emptyWorkspaceImage, emptyWorkspaceImageSettled } from "../src/sandbox/workspace-image.ts";
import { startWorkers } from "../src/workers.ts";

// An in-process worker whose driver counts the execs run in each sandbox and can refuse the
// empty-workspace image once (as when it was removed underneath).
let database: TestDatabase;
let redis: Redis;
let prefix: string;
let workers: Worker[];
let deps: WorkerDeps;
let real: SandboxDriver;
const execs = new Map<string, number>();
const faults = { refuseImage: null as string | null };

beforeAll(async () => {
  database = await createTestDatabase();
  prefix = createRedisPrefix();
  redis = createRedis(testRedisUrl(), "worker");
  await redis.ping();
  real = testSandboxDriver();
  await prepareTestSandboxes(real);
  const { engineId } = await real.prepare();
  const counting: SandboxDriver = {
    ...real,
    async create(spec) {
      if (faults.refuseImage && spec.image === faults.refuseImage) {
        faults.refuseImage = null;
        throw new Error(`(HTTP code 404) no such image - ${spec.image}`);
      }
      return real.create(spec);
    },
    async exec(ref, opts) {
      execs.set(ref, (execs.get(ref) ?? 0) + 1);
      return real.exec(ref, opts);
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
    sandboxes: counting,
    // Images made by a commit stay on their engine: the image is only for workers with affinity.
    engineId,
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
  redis.disconnect();
  await deleteRedisPrefix(prefix);
  await database.drop();
});

const startReady = async () => {
  const user = await usersRepository(database.db).create();
  const { id } = await startConversation(deps, user.id, {});
  const task = await waitFor(
    async () => {
      const t = await startTasksRepository(database.db).get(id);
      return (t?.status === "READY" || t?.status === "ERROR") && t;
    },
    { what: `task ${id} to end READY or ERROR`, timeoutMs: 60_000 },
  );
  expect(task).toMatchObject({ status: "READY", detail: null });
  const sandbox = await sandboxesRepository(database.db).findByTask(id);
  const ref = sandbox!.ref!;
  // Counted before the checks below run their own.
  const during = execs.get(ref) ?? 0;
  const ws = await real.exec(ref, {
    cmd: [
      "bash",
      "-c",
      "cd /workspace/project && git rev-parse --is-inside-work-tree && git config user.name && ls -A",
    ],
  });
  return { during, workspace: ws.stdout };
};

describe("a cold start without a repository", () => {
  it("creates from the empty-workspace image and runs no exec: the workspace is there, a git repository with its identity", async () => {
    // The processor asked for the image when the worker started; made (or found) by now.
    emptyWorkspaceImage(deps);
    await emptyWorkspaceImageSettled(deps);
    expect(emptyWorkspaceImage(deps)).toMatch(/^sha256:/);
    const { during, workspace } = await startReady();
    expect(during).toBe(0);
    expect(workspace).toBe("true\nopenhands\n.git\n");
  });

  it("whose image is gone underneath is made from the sandbox image, its workspace by one exec", async () => {
    faults.refuseImage = emptyWorkspaceImage(deps);
    expect(faults.refuseImage).not.toBeNull();
    const { during, workspace } = await startReady();
    expect(faults.refuseImage).toBeNull();
    expect(during).toBe(1);
    expect(workspace).toBe("true\nopenhands\n.git\n");
  });
});
