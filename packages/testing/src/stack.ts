import { randomBytes } from "node:crypto";
import { once } from "node:events";
import { DEFAULT_API_KEY_MAX_LIFETIME_DAYS } from "@tern/core";
import { createQueues, createRedis, type Queues } from "@tern/queue";
import { createUserWithKey } from "@tern/services";
import type { Redis } from "ioredis";
import { type ApiClient, apiClient } from "./api-client.ts";
import { createTestDatabase, type TestDatabase } from "./database.ts";
import { type GitServer, startGitServer } from "./git-server.ts";
import { type ScriptedLlmServer, startLlmServer } from "./llm-server.ts";
import { type ServiceProcess, startService } from "./processes.ts";
import { createRedisPrefix, deleteRedisPrefix, testRedisUrl } from "./redis.ts";
import { prepareTestSandboxes, removeSandboxesOfNamespace, testSandboxDriver } from "./sandboxes.ts";
import { tenancyLimitsOff } from "./tenancy.ts";

export interface StackOptions {
  /**
   * A worker process, started with the stack (true, or the env on top of its defaults); more with
   * `startWorker`. Every worker of the stack runs on its database and Redis prefix, on the file's
   * sandbox network, with no warm pool.
   */
  worker?: boolean | Record<string, string>;
  /** A git server that sandboxes reach, with a token of its own: workers clone from it (GIT_BASE_URL). */
  git?: boolean;
  /** The scripted LLM: workers speak to it as this provider (true: openai); none: workers have no LLM. */
  llm?: boolean | "openai" | "anthropic";
  /** An API process, started with the stack (true, or its env on top of its defaults); more with `startApi`. */
  api?: boolean | Record<string, string>;
  /** Env of every worker, on top of the stack's and below each worker's own. */
  workerEnv?: Record<string, string>;
  /** The API's own env (an API served in the test's process is built from it), below each process's own. */
  apiEnv?: Record<string, string>;
  /**
   * The role of the stack's own Redis connection (createRedis): a producer's (default, as the API's)
   * fails a command fast while Redis is away; a worker's waits for it.
   */
  redisRole?: "producer" | "worker";
  /** Ready deadline of each process (scaled): a file that starts several at once on a loaded machine. */
  processTimeoutMs?: number;
}

/**
 * One test file's deployment: its own database, Redis prefix (also its sandbox namespace), and the
 * parts it asks for: API and worker processes, a git server, the scripted LLM.
 */
export interface TestStack {
  database: TestDatabase;
  prefix: string;
  /** A producer connection on the stack's Redis, and the queues on its prefix. */
  redis: Redis;
  queues: Queues;
  /** The git server (asked with `git: true`) and the token workers present to it. */
  git: GitServer;
  gitToken: string;
  /** The scripted LLM (asked with `llm`). */
  llm: ScriptedLlmServer;
  /** The API process the stack started (asked with `api`). */
  api: ServiceProcess;
  /** The worker process started last. */
  worker: ServiceProcess;
  /** The env a worker of this stack gets: the stack's, then `extra`. */
  workerEnv: (extra?: Record<string, string>) => Record<string, string>;
  /** The env an API of this stack gets: the stack's, then `extra`. */
  apiEnv: (extra?: Record<string, string>) => Record<string, string>;
  /** Starts a worker process (stopped by `close`); `env` on top of the stack's worker env. */
  startWorker: (env?: Record<string, string>, opts?: { timeoutMs?: number }) => Promise<ServiceProcess>;
  /** Starts an API process (stopped by `close`); `env` on top of the stack's API env. */
  startApi: (env?: Record<string, string>, opts?: { timeoutMs?: number }) => Promise<ServiceProcess>;
  /** A new user with one key. */
  newUser: (opts?: {
    name?: string;
    admin?: boolean;
    expiresAt?: string | null;
  }) => Promise<{ key: string; userId: string }>;
  /** A client of the stack's API process (or of `url`) with `key`; failures show the last worker's output. */
  client: (key: string, url?: string) => ApiClient;
  close: () => Promise<void>;
}

const asked = <T>(value: T | undefined, what: string): T => {
  if (value === undefined) throw new Error(`this test stack was not asked for ${what} (startStack({ ${what}: … }))`);
  return value;
};

export const startStack = async (opts: StackOptions = {}): Promise<TestStack> => {
  const database = await createTestDatabase();
  const prefix = createRedisPrefix();
  const redis = createRedis(testRedisUrl(), opts.redisRole ?? "producer");
  const queues = createQueues(redis, prefix);
  const processes: ServiceProcess[] = [];
  let git: GitServer | undefined;
  let llm: ScriptedLlmServer | undefined;
  let api: ServiceProcess | undefined;
  let worker: ServiceProcess | undefined;
  const gitToken = `tok_${randomBytes(12).toString("hex")}`;
  const provider = opts.llm === "anthropic" ? "anthropic" : "openai";
  const timeout = opts.processTimeoutMs ? { timeoutMs: opts.processTimeoutMs } : {};

  const stack: TestStack = {
    database,
    prefix,
    redis,
    queues,
    get git() {
      return asked(git, "git");
    },
    gitToken,
    get llm() {
      return asked(llm, "llm");
    },
    get api() {
      return asked(api, "api");
    },
    get worker() {
      return asked(worker, "worker");
    },
    workerEnv: (extra = {}) => ({
      DATABASE_URL: database.url,
      REDIS_URL: testRedisUrl(),
      REDIS_PREFIX: prefix,
      SANDBOX_POOL_SIZE: "0",
      ...(git
        ? // One team's deployment: the server's token serves every user (no user brings their own here).
          { GIT_BASE_URL: git.url, GIT_TOKEN: gitToken, GIT_TOKEN_SHARED: "true" }
        : {}),
      ...(llm ? llm.workerEnv(provider) : { LLM_PROVIDER: "", LLM_BASE_URL: "", LLM_API_KEY: "", LLM_MODEL: "" }),
      ...opts.workerEnv,
      ...extra,
    }),
    apiEnv: (extra = {}) => ({
      DATABASE_URL: database.url,
      REDIS_URL: testRedisUrl(),
      REDIS_PREFIX: prefix,
      // Bursts of starts and reads by one user: the tenancy limits are the tests' of them to turn on.
      ...tenancyLimitsOff,
      ...opts.apiEnv,
      ...extra,
    }),
    async startWorker(env = {}, o = timeout) {
      const p = await startService("worker", stack.workerEnv(env), o);
      processes.push(p);
      worker = p;
      return p;
    },
    async startApi(env = {}, o = timeout) {
      const p = await startService("api", stack.apiEnv(env), o);
      processes.push(p);
      return p;
    },
    newUser: (o = {}) => {
      // The cap the stack's API holds keys to, as its own key route would.
      const cap = stack.apiEnv().API_KEY_MAX_LIFETIME_DAYS;
      return createUserWithKey(
        { db: database.db, maxKeyLifetimeDays: cap ? Number(cap) : DEFAULT_API_KEY_MAX_LIFETIME_DAYS },
        { name: "test", ...o },
      );
    },
    client: (key, url) =>
      apiClient({
        url: url ?? stack.api.url,
        key,
        detail: () => worker?.output().slice(-3000) ?? "",
      }),
    async close() {
      await Promise.all(processes.map((p) => p.stop().catch(() => undefined)));
      // Sandboxes come with workers: a stack without one asks the engine nothing.
      if (worker) await removeSandboxesOfNamespace(prefix).catch(() => undefined);
      await queues.close().catch(() => undefined);
      redis.disconnect();
      await git?.close();
      await llm?.close();
      await deleteRedisPrefix(prefix);
      await database.drop();
    },
  };

  try {
    // A producer refuses commands until its connection is ready: wait for it.
    if (redis.status !== "ready") await once(redis, "ready");
    if (opts.git || opts.worker) {
      const { hostAddress } = await prepareTestSandboxes(testSandboxDriver());
      if (opts.git) git = await startGitServer({ host: hostAddress, token: gitToken });
    }
    if (opts.llm) llm = await startLlmServer();
    await Promise.all([
      opts.api ? stack.startApi(opts.api === true ? {} : opts.api).then((p) => (api = p)) : undefined,
      opts.worker ? stack.startWorker(opts.worker === true ? {} : opts.worker) : undefined,
    ]);
  } catch (err) {
    await stack.close();
    throw err;
  }
  return stack;
};
