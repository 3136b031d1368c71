import { z } from "zod";

/** Thrown when the environment is unusable; names the variable so the operator can fix it. */
export class ConfigError extends Error {
  readonly variable: string;
  constructor(variable: string, message: string) {
    super(`Invalid configuration: ${variable}: ${message}`);
    this.name = "ConfigError";
    this.variable = variable;
  }
}

const url = (protocols: string[]) =>
  z.string().refine(
    (v) => {
      try {
        return protocols.includes(new URL(v).protocol);
      } catch {
        return false;
      }
    },
    { message: `must be a URL with scheme ${protocols.map((p) => p.replace(":", "")).join(" or ")}` },
  );

const int = (min: number, max: number) => z.coerce.number().int().min(min).max(max);
const emptyAsUndefined = (v: unknown) => (v === "" ? undefined : v);

/** Pieces each process composes into its own schema, keyed by environment variable. */
export const configFields = {
  DATABASE_URL: url(["postgres:", "postgresql:"]).default("postgres://postgres@127.0.0.1:5432/tern"),
  REDIS_URL: url(["redis:", "rediss:"]).default("redis://127.0.0.1:6379"),
  REDIS_PREFIX: z
    .string()
    .regex(/^[A-Za-z0-9:_-]+$/)
    .default("tern"),
  LOG_LEVEL: z.enum(["fatal", "error", "warn", "info", "debug", "trace", "silent"]).default("info"),
  PORT: int(0, 65535).default(3000),
  HOST: z.string().default("0.0.0.0"),
  PUBLIC_URL: z.preprocess(emptyAsUndefined, url(["http:", "https:"]).optional()),
  DOCKER_HOST: z.preprocess(emptyAsUndefined, z.string().optional()),
  SANDBOX_IMAGE: z.string().min(1).default("tern-sandbox:latest"),
  SANDBOX_NETWORK: z.string().min(1).default("tern-sandboxes"),
  SANDBOX_MEMORY_MB: int(64, 1_048_576).default(2048),
  SANDBOX_CPUS: z.coerce.number().positive().max(256).default(1),
  SANDBOX_PIDS_LIMIT: int(16, 1_000_000).default(512),
  SANDBOX_POOL_SIZE: int(0, 100).default(2),
  WORKER_CONCURRENCY: int(1, 1000).default(4),
  SETUP_SCRIPT_TIMEOUT: int(1, 86_400).default(600),
  START_TASK_DEADLINE: int(10, 86_400).default(1800),
  GIT_BASE_URL: url(["http:", "https:"]).default("https://github.com"),
  GIT_TOKEN: z.preprocess(emptyAsUndefined, z.string().optional()),
  LLM_PROVIDER: z.preprocess(emptyAsUndefined, z.enum(["openai", "anthropic"]).optional()),
  LLM_BASE_URL: z.preprocess(emptyAsUndefined, url(["http:", "https:"]).optional()),
  LLM_API_KEY: z.preprocess(emptyAsUndefined, z.string().optional()),
  LLM_MODEL: z.preprocess(emptyAsUndefined, z.string().optional()),
  MAX_ITERATIONS: int(1, 10_000).default(100),
  API_KEY_MAX_LIFETIME_DAYS: int(1, 36_500).default(365),
  CURSOR_SECRET: z.preprocess(emptyAsUndefined, z.string().min(16).optional()),
} as const;

/** Parses `env` once with `schema`; the first bad variable stops the process with its name. */
export const parseConfig = <S extends z.ZodObject>(schema: S, env: Record<string, string | undefined>): z.infer<S> => {
  const result = schema.safeParse(env);
  if (result.success) return result.data;
  const issue = result.error.issues[0];
  const variable = String(issue?.path[0] ?? "environment");
  throw new ConfigError(variable, issue?.message ?? "invalid");
};
