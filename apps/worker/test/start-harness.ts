import { randomBytes } from "node:crypto";
import { type StartRequest, type StartTask, type StartTaskStatus, toHexId } from "@tern/core";
import { startTasksRepository } from "@tern/db";
import { createQueues, createRedis, type Queues, startJobOptions } from "@tern/queue";
import {
  containersOfNamespace,
  createRedisPrefix,
  createTestDatabase,
  createUserWithKey,
  deleteRedisPrefix,
  ensureTestSandboxNetwork,
  type GitServer,
  removeContainersOfNamespace,
  type ServiceProcess,
  startGitServer,
  startService,
  type TestDatabase,
  testDocker,
  testRedisUrl,
  testSandboxNetworkName,
} from "@tern/testing";
import type { Redis } from "ioredis";

/**
 * One test file's world: its own database, Redis prefix (also the container namespace), git
 * server on the sandbox network's gateway, and real worker (and API) processes.
 */
export interface StartHarness {
  database: TestDatabase;
  prefix: string;
  redis: Redis;
  queues: Queues;
  git: GitServer;
  gitToken: string;
  /** Starts a worker process; `env` on top of the harness's. */
  startWorker: (env?: Record<string, string>) => Promise<ServiceProcess>;
  startApi: () => Promise<ServiceProcess>;
  newUser: () => Promise<{ userId: string; key: string }>;
  /** POST /api/v1/app-conversations through the API process; returns the response. */
  post: (api: ServiceProcess, key: string, body: unknown) => Promise<Response>;
  /** A start task inserted and enqueued directly, as the API does. */
  enqueueDirect: (userId: string, request: StartRequest) => Promise<string>;
  /** Polls the task until READY or ERROR, remembering every status it was seen in, in order. */
  waitForTask: (taskId: string, timeoutMs?: number) => Promise<{ task: StartTask; seen: StartTaskStatus[] }>;
  /** Runs a command in a container (as the sandbox user) through the Docker CLI-free API. */
  execIn: (containerName: string, script: string) => Promise<{ exitCode: number; output: string }>;
  containers: () => Promise<Awaited<ReturnType<typeof containersOfNamespace>>>;
  close: () => Promise<void>;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The id as the database writes it (the API answers with 32 hex characters). */
export const uuidOf = (hex: string): string =>
  hex.includes("-") ? hex : hex.replace(/^(.{8})(.{4})(.{4})(.{4})(.{12})$/, "$1-$2-$3-$4-$5");

export const createStartHarness = async (): Promise<StartHarness> => {
  const docker = testDocker();
  const network = await ensureTestSandboxNetwork(docker);
  const database = await createTestDatabase();
  const prefix = createRedisPrefix();
  const redis = createRedis(testRedisUrl(), "worker");
  const queues = createQueues(redis, prefix);
  const gitToken = `tok_${randomBytes(12).toString("hex")}`;
  const git = await startGitServer({ host: network.gateway, token: gitToken });
  const processes: ServiceProcess[] = [];
  const tasks = startTasksRepository(database.db);

  const baseEnv = (): Record<string, string> => ({
    DATABASE_URL: database.url,
    REDIS_URL: testRedisUrl(),
    REDIS_PREFIX: prefix,
    SANDBOX_NETWORK: testSandboxNetworkName(),
    SANDBOX_POOL_SIZE: "0",
    SANDBOX_MEMORY_MB: "512",
    GIT_BASE_URL: git.url,
    GIT_TOKEN: gitToken,
    WORKER_LOCK_DURATION_MS: "3000",
    WORKER_STALLED_INTERVAL_MS: "1000",
    WORKER_SHUTDOWN_GRACE_MS: "5000",
    LOG_LEVEL: "info",
    LLM_PROVIDER: "",
    LLM_BASE_URL: "",
    LLM_API_KEY: "",
    LLM_MODEL: "",
  });

  const harness: StartHarness = {
    database,
    prefix,
    redis,
    queues,
    git,
    gitToken,
    async startWorker(env = {}) {
      const p = await startService("worker", { ...baseEnv(), ...env });
      processes.push(p);
      return p;
    },
    async startApi() {
      const p = await startService("api", {
        DATABASE_URL: database.url,
        REDIS_URL: testRedisUrl(),
        REDIS_PREFIX: prefix,
      });
      processes.push(p);
      return p;
    },
    newUser: () => createUserWithKey(database.db, { name: "worker-test" }),
    post: (api, key, body) =>
      fetch(`${api.url}/api/v1/app-conversations`, {
        method: "POST",
        headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
        body: JSON.stringify(body),
      }),
    async enqueueDirect(userId, request) {
      const task = await tasks.create(userId, request);
      await queues.start.add("start", { taskId: task.id }, { ...startJobOptions, jobId: task.id });
      return task.id;
    },
    async waitForTask(taskId, timeoutMs = 60_000) {
      const id = uuidOf(taskId);
      const seen: StartTaskStatus[] = [];
      const started = Date.now();
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const task = await tasks.get(id);
        if (!task) throw new Error(`task ${id} not found`);
        if (seen[seen.length - 1] !== task.status) seen.push(task.status);
        if (task.status === "READY" || task.status === "ERROR") {
          if (process.env.TERN_TEST_DEBUG) console.info("waitForTask", id, Date.now() - started, "ms", seen.join(">"));
          return { task, seen };
        }
        if (Date.now() > deadline)
          throw new Error(`task ${toHexId(id)} still ${task.status} (seen ${seen.join(" > ")})`);
        await sleep(20);
      }
    },
    async execIn(containerName, script) {
      const exec = await docker.getContainer(containerName).exec({
        Cmd: ["bash", "-c", script],
        AttachStdout: true,
        AttachStderr: true,
      });
      const stream = await exec.start({});
      const chunks: Buffer[] = [];
      const out = { write: (c: Buffer) => chunks.push(c) } as unknown as NodeJS.WritableStream;
      docker.modem.demuxStream(stream, out, out);
      await new Promise((resolve) => stream.on("end", resolve));
      let info = await exec.inspect();
      while (info.Running) {
        await sleep(10);
        info = await exec.inspect();
      }
      return { exitCode: info.ExitCode ?? -1, output: Buffer.concat(chunks).toString("utf8") };
    },
    containers: () => containersOfNamespace(prefix, docker),
    async close() {
      await Promise.all(processes.map((p) => p.stop().catch(() => undefined)));
      await removeContainersOfNamespace(prefix, docker);
      await queues.close().catch(() => undefined);
      redis.disconnect();
      await git.close();
      await deleteRedisPrefix(prefix);
      await database.drop();
    },
  };
  return harness;
};

/** Every stage a start with a repository goes through, in order. */
export const allStages: StartTaskStatus[] = [
  "WORKING",
  "WAITING_FOR_SANDBOX",
  "PREPARING_REPOSITORY",
  "RUNNING_SETUP_SCRIPT",
  "SETTING_UP_GIT_HOOKS",
  "SETTING_UP_SKILLS",
  "STARTING_CONVERSATION",
  "READY",
];

/** True when `seen` is `all` with some entries skipped (polling misses short stages), order kept. */
export const isInOrder = (seen: string[], all: string[]): boolean => {
  let i = 0;
  for (const s of seen) {
    const at = all.indexOf(s, i);
    if (at < 0) return false;
    i = at + 1;
  }
  return true;
};
