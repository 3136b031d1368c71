import { configFields, parseConfig } from "@tern/core";
import { z } from "zod";

const emptyAsUndefined = (v: unknown) => (v === "" ? undefined : v);
const ms = z.coerce.number().int().min(100).max(3_600_000);

export const workerConfigSchema = z.object({
  DATABASE_URL: configFields.DATABASE_URL,
  REDIS_URL: configFields.REDIS_URL,
  REDIS_PREFIX: configFields.REDIS_PREFIX,
  LOG_LEVEL: configFields.LOG_LEVEL,
  PUBLIC_URL: configFields.PUBLIC_URL,
  DOCKER_HOST: configFields.DOCKER_HOST,
  SANDBOX_IMAGE: configFields.SANDBOX_IMAGE,
  SANDBOX_NETWORK: configFields.SANDBOX_NETWORK,
  SANDBOX_MEMORY_MB: configFields.SANDBOX_MEMORY_MB,
  SANDBOX_CPUS: configFields.SANDBOX_CPUS,
  SANDBOX_PIDS_LIMIT: configFields.SANDBOX_PIDS_LIMIT,
  SANDBOX_POOL_SIZE: configFields.SANDBOX_POOL_SIZE,
  WORKER_CONCURRENCY: configFields.WORKER_CONCURRENCY,
  SETUP_SCRIPT_TIMEOUT: configFields.SETUP_SCRIPT_TIMEOUT,
  START_TASK_DEADLINE: configFields.START_TASK_DEADLINE,
  GIT_BASE_URL: configFields.GIT_BASE_URL,
  GIT_TOKEN: configFields.GIT_TOKEN,
  LLM_PROVIDER: configFields.LLM_PROVIDER,
  LLM_BASE_URL: configFields.LLM_BASE_URL,
  LLM_API_KEY: configFields.LLM_API_KEY,
  LLM_MODEL: configFields.LLM_MODEL,
  MAX_ITERATIONS: configFields.MAX_ITERATIONS,
  /** Per-provider clone bases; each falls back to GIT_BASE_URL. */
  GIT_BASE_URL_GITHUB: z.preprocess(emptyAsUndefined, configFields.GIT_BASE_URL.optional()),
  GIT_BASE_URL_GITLAB: z.preprocess(emptyAsUndefined, configFields.GIT_BASE_URL.optional()),
  GIT_BASE_URL_BITBUCKET: z.preprocess(emptyAsUndefined, configFields.GIT_BASE_URL.optional()),
  /** How long a job's lock lasts without renewal: a dead worker's job is taken over after about this long. */
  WORKER_LOCK_DURATION_MS: ms.default(30_000),
  /** How often each worker looks for jobs whose lock expired (stalled). */
  WORKER_STALLED_INTERVAL_MS: ms.default(30_000),
  /** On SIGTERM, how long running jobs get to finish before they are handed back (stalled) to others. */
  WORKER_SHUTDOWN_GRACE_MS: ms.default(25_000),
  JANITOR_INTERVAL_MS: ms.default(30_000),
  /** Names this process in logs and pool labels; defaults to hostname and pid. */
  WORKER_ID: z.preprocess(
    emptyAsUndefined,
    z
      .string()
      .regex(/^[A-Za-z0-9_.-]{1,64}$/)
      .optional(),
  ),
});

export type WorkerConfig = z.infer<typeof workerConfigSchema>;

export const loadWorkerConfig = (env: Record<string, string | undefined>): WorkerConfig =>
  parseConfig(workerConfigSchema, env);
