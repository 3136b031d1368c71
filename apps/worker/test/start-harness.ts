import {
  createLogger,
  parseId,
  type StartRequest,
  type StartTask,
  type StartTaskStatus,
  startTaskStatuses,
  toHexId,
} from "@tern/core";
import { startTasksRepository } from "@tern/db";
import { createRedis, type Queues } from "@tern/queue";
import type { SandboxInfo } from "@tern/sandbox";
import { startConversation } from "@tern/services";
import {
  type GitServer,
  removeSandboxesOfNamespace,
  type ServiceProcess,
  sandboxesOfNamespace,
  startStack,
  type TestDatabase,
  testRedisUrl,
  testSandboxDriver,
  waitFor,
} from "@tern/testing";
import type { Redis } from "ioredis";
import { janitorEventsChannel } from "../src/janitor-schedule.ts";

/**
 * One test file's world: its own database, Redis prefix (also the sandbox namespace), git
 * server where sandboxes reach this host, and real worker (and API) processes.
 */
export interface StartHarness {
  database: TestDatabase;
  prefix: string;
  redis: Redis;
  queues: Queues;
  /** The engine the workers drive (the main one): their runs and commands go to its queues. */
  engineId: string | null;
  git: GitServer;
  gitToken: string;
  /** Starts a worker process; `env` on top of the harness's. */
  startWorker: (env?: Record<string, string>, opts?: { timeoutMs?: number }) => Promise<ServiceProcess>;
  startApi: (opts?: { timeoutMs?: number; env?: Record<string, string> }) => Promise<ServiceProcess>;
  newUser: () => Promise<{ userId: string; key: string }>;
  /** POST /api/v1/app-conversations through the API process; returns the response. */
  post: (api: ServiceProcess, key: string, body: unknown) => Promise<Response>;
  /** A conversation started directly, as the API starts it (the start task and its job). */
  enqueueDirect: (userId: string, request: StartRequest) => Promise<string>;
  /** Polls the task until READY or ERROR, remembering every status it was seen in, in order. */
  waitForTask: (taskId: string, timeoutMs?: number) => Promise<{ task: StartTask; seen: StartTaskStatus[] }>;
  /** Runs a command in a sandbox (by ref or name, as the sandbox user); stdout and stderr as they came. */
  execIn: (sandbox: string, script: string) => Promise<{ exitCode: number; output: string }>;
  /** Every sandbox of this file's namespace, in any state. */
  sandboxes: () => Promise<SandboxInfo[]>;
  /**
   * Starts watching the janitor; `after(n)` resolves once `n` sweeps that began after this call
   * have completed: every janitor had its chance to act on what the test set up before it.
   */
  watchJanitor: () => Promise<{ after: (n: number, timeoutMs?: number) => Promise<void> }>;
  close: () => Promise<void>;
}

/** The id as the database writes it (the API answers with 32 hex characters). */
export const uuidOf = (hex: string): string => parseId(hex) ?? hex;

/**
 * Calls an API process as `key`, keeping the text of every answer: the secrets tests search all
 * that a client was ever shown for what must not appear.
 */
export const recordingClient = (apiUrl: string, key: string) => {
  const answers: string[] = [];
  const call = async (path: string, init: RequestInit = {}) => {
    const res = await fetch(`${apiUrl}${path}`, {
      ...init,
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    });
    const text = await res.text();
    answers.push(text);
    return { status: res.status, body: JSON.parse(text) };
  };
  return { answers, call };
};

export const createStartHarness = async (): Promise<StartHarness> => {
  const driver = testSandboxDriver();
  const stack = await startStack({
    git: true,
    redisRole: "worker",
    workerEnv: {
      SANDBOX_MEMORY_MB: "512",
      WORKER_LOCK_DURATION_MS: "3000",
      WORKER_STALLED_INTERVAL_MS: "1000",
      WORKER_SHUTDOWN_GRACE_MS: "5000",
      LOG_LEVEL: "info",
    },
  });
  // The workers' engine: their janitor sweeps on its own queue (affinity).
  const { engineId } = await driver.prepare();
  const { database, prefix, redis, queues } = stack;
  const tasks = startTasksRepository(database.db);
  const logger = createLogger("worker-test", "silent");

  const harness: StartHarness = {
    database,
    prefix,
    redis,
    queues,
    engineId,
    git: stack.git,
    gitToken: stack.gitToken,
    startWorker: (env = {}, opts) => stack.startWorker(env, opts),
    startApi: ({ env = {}, ...opts } = {}) => stack.startApi(env, opts),
    newUser: () => stack.newUser({ name: "worker-test" }),
    post: (api, key, body) =>
      stack.client(key, api.url).call("/api/v1/app-conversations", { method: "POST", json: body }),
    async enqueueDirect(userId, request) {
      const task = await startConversation({ db: database.db, queues, redis, logger }, userId, request);
      return task.id;
    },
    async waitForTask(taskId, timeoutMs = 60_000) {
      const id = uuidOf(taskId);
      const seen: StartTaskStatus[] = [];
      const started = Date.now();
      const task = await waitFor(
        async () => {
          const t = await tasks.get(id);
          if (!t) throw new Error(`task ${id} not found`);
          if (seen[seen.length - 1] !== t.status) seen.push(t.status);
          return (t.status === "READY" || t.status === "ERROR") && t;
        },
        {
          what: `task ${toHexId(id)} to end READY or ERROR`,
          timeoutMs,
          intervalMs: 20,
          detail: () => `seen ${seen.join(" > ")}`,
        },
      );
      if (process.env.TERN_TEST_DEBUG) console.info("waitForTask", id, Date.now() - started, "ms", seen.join(">"));
      return { task, seen };
    },
    async execIn(sandbox, script) {
      let output = "";
      const r = await driver.exec(sandbox, { cmd: ["bash", "-c", script], onOutput: (chunk) => (output += chunk) });
      return { exitCode: r.exitCode ?? -1, output };
    },
    sandboxes: () => sandboxesOfNamespace(prefix, driver),
    async watchJanitor() {
      // Each sweep publishes its beginning and end (janitor-schedule.ts): the schedule is the
      // workers' own, so there is no job to watch.
      const subscriber = createRedis(testRedisUrl(), "worker");
      await subscriber.subscribe(janitorEventsChannel(prefix));
      // Only sweeps seen to begin from now on count. One that began unseen (before the subscription)
      // is not counted: the wait can only get longer, never end too early.
      const begun = new Set<string>();
      let completed = 0;
      subscriber.on("message", (_channel, message: string) => {
        const { phase, runId } = JSON.parse(message) as { phase: string; runId: string };
        if (phase === "begin") begun.add(runId);
        else if (phase === "end" && begun.has(runId)) completed++;
      });
      return {
        async after(n, timeoutMs = 30_000) {
          try {
            await waitFor(() => completed >= n, { what: `${n} janitor sweep(s) to complete`, timeoutMs });
          } finally {
            subscriber.disconnect();
          }
        },
      };
    },
    async close() {
      // The stack removes its sandboxes only when it started a worker; a harness's test may make them itself.
      await stack.close();
      await removeSandboxesOfNamespace(prefix, driver);
    },
  };
  return harness;
};

/** Every stage a start with a repository goes through, in order: core's list, which is in stage order. */
export const allStages: StartTaskStatus[] = startTaskStatuses.filter((s) => s !== "ERROR");

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
