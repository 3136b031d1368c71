import { configFields, parseConfig } from "@tern/core";
import { z } from "zod";

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
});

export type WorkerConfig = z.infer<typeof workerConfigSchema>;

export const loadWorkerConfig = (env: Record<string, string | undefined>): WorkerConfig =>
  parseConfig(workerConfigSchema, env);
