import { configFields, hasUrlScheme, parseConfig } from "@tern/core";
import { type SandboxLimits, sandboxConfigFields } from "@tern/sandbox";
import { z } from "zod";

const emptyAsUndefined = (v: unknown) => (v === "" ? undefined : v);
const ms = z.coerce.number().int().min(100).max(3_600_000);
const flag = z.preprocess(
  emptyAsUndefined,
  z.enum(["true", "false", "1", "0", "yes", "no"]).transform((v) => v === "true" || v === "1" || v === "yes"),
);
const httpUrl = z.string().refine((v) => hasUrlScheme(v, ["http:", "https:"]), { message: "must be an http(s) URL" });

const workerConfigSchema = z.object({
  DATABASE_URL: configFields.DATABASE_URL,
  REDIS_URL: configFields.REDIS_URL,
  REDIS_PREFIX: configFields.REDIS_PREFIX,
  LOG_LEVEL: configFields.LOG_LEVEL,
  SECRETS_KEY: configFields.SECRETS_KEY,
  SECRETS_KEY_FILE: configFields.SECRETS_KEY_FILE,
  PUBLIC_URL: configFields.PUBLIC_URL,
  OTEL_EXPORTER_OTLP_ENDPOINT: configFields.OTEL_EXPORTER_OTLP_ENDPOINT,
  // The sandbox driver and how it reaches its backend (SANDBOX_DRIVER, DOCKER_HOST, ...): @tern/sandbox's own.
  ...sandboxConfigFields,
  SANDBOX_IMAGE: configFields.SANDBOX_IMAGE,
  SANDBOX_IMAGES: configFields.SANDBOX_IMAGES,
  SANDBOX_MEMORY_MB: configFields.SANDBOX_MEMORY_MB,
  SANDBOX_CPUS: configFields.SANDBOX_CPUS,
  SANDBOX_PIDS_LIMIT: configFields.SANDBOX_PIDS_LIMIT,
  SANDBOX_NOFILE: configFields.SANDBOX_NOFILE,
  SANDBOX_NPROC: configFields.SANDBOX_NPROC,
  SANDBOX_POOL_SIZE: configFields.SANDBOX_POOL_SIZE,
  SANDBOX_POOL_MAX: configFields.SANDBOX_POOL_MAX,
  SANDBOX_POOL_PARALLEL_CREATES: configFields.SANDBOX_POOL_PARALLEL_CREATES,
  WORKER_CONCURRENCY: configFields.WORKER_CONCURRENCY,
  SETUP_SCRIPT_TIMEOUT: configFields.SETUP_SCRIPT_TIMEOUT,
  START_TASK_DEADLINE: configFields.START_TASK_DEADLINE,
  GIT_BASE_URL: configFields.GIT_BASE_URL,
  GIT_TOKEN: configFields.GIT_TOKEN,
  LLM_PROVIDER: configFields.LLM_PROVIDER,
  LLM_BASE_URL: configFields.LLM_BASE_URL,
  LLM_API_KEY: configFields.LLM_API_KEY,
  LLM_MODEL: configFields.LLM_MODEL,
  LLM_MODELS: configFields.LLM_MODELS,
  LLM_PRICES: configFields.LLM_PRICES,
  LLM_USER_BASE_URLS: configFields.LLM_USER_BASE_URLS,
  LLM_MAX_OUTPUT_TOKENS: configFields.LLM_MAX_OUTPUT_TOKENS,
  LLM_RETRY_MAX_WAIT: configFields.LLM_RETRY_MAX_WAIT,
  LLM_THINKING_BUDGET: configFields.LLM_THINKING_BUDGET,
  LLM_REASONING_EFFORT: configFields.LLM_REASONING_EFFORT,
  LLM_NATIVE_TOOL_CALLS: configFields.LLM_NATIVE_TOOL_CALLS,
  MAX_BUDGET_PER_TASK: configFields.MAX_BUDGET_PER_TASK,
  MAX_ITERATIONS: configFields.MAX_ITERATIONS,
  MAX_EVENTS_PER_CONVERSATION: configFields.MAX_EVENTS_PER_CONVERSATION,
  AGENT_CONDENSER_MAX_EVENTS: configFields.AGENT_CONDENSER_MAX_EVENTS,
  AGENT_STUCK_MONOLOGUE: configFields.AGENT_STUCK_MONOLOGUE,
  LLM_CONTEXT_WINDOWS: configFields.LLM_CONTEXT_WINDOWS,
  /**
   * Seconds a terminal command may print nothing before its call returns to the agent (exit code
   * -1, the command still running); OpenHands' no-change timeout. A call with its own `timeout` waits that long instead.
   */
  TERMINAL_NO_CHANGE_TIMEOUT_SECONDS: z.coerce.number().int().min(1).max(86_400).default(30),
  MAX_SKILLS_BYTES: configFields.MAX_SKILLS_BYTES,
  SANDBOX_IDLE_PAUSE: configFields.SANDBOX_IDLE_PAUSE,
  SANDBOX_MAX_AGE: configFields.SANDBOX_MAX_AGE,
  WEBHOOK_ALLOW_PRIVATE: configFields.WEBHOOK_ALLOW_PRIVATE,
  WEBHOOK_ALLOW_HTTP: configFields.WEBHOOK_ALLOW_HTTP,
  WEBHOOK_TIMEOUT_MS: configFields.WEBHOOK_TIMEOUT_MS,
  MCP_ALLOW_PRIVATE: configFields.MCP_ALLOW_PRIVATE,
  MCP_ALLOW_HTTP: configFields.MCP_ALLOW_HTTP,
  MCP_MAX_SERVERS: configFields.MCP_MAX_SERVERS,
  MCP_MAX_TOOLS: configFields.MCP_MAX_TOOLS,
  MCP_CALL_TIMEOUT_MS: configFields.MCP_CALL_TIMEOUT_MS,
  MCP_CONNECT_TIMEOUT_MS: configFields.MCP_CONNECT_TIMEOUT_MS,
  MCP_STARTUP_TIMEOUT_MS: configFields.MCP_STARTUP_TIMEOUT_MS,
  MCP_MAX_RESPONSE_BYTES: configFields.MCP_MAX_RESPONSE_BYTES,
  WEBHOOK_RETRY_BASE_MS: configFields.WEBHOOK_RETRY_BASE_MS,
  WEBHOOK_RETRY_MAX_DELAY_MS: configFields.WEBHOOK_RETRY_MAX_DELAY_MS,
  WEBHOOK_RETRY_WINDOW_MS: configFields.WEBHOOK_RETRY_WINDOW_MS,
  WEBHOOK_SWEEP_INTERVAL_MS: configFields.WEBHOOK_SWEEP_INTERVAL_MS,
  /** Per-provider clone bases; each falls back to GIT_BASE_URL. */
  GIT_BASE_URL_GITHUB: z.preprocess(emptyAsUndefined, configFields.GIT_BASE_URL.optional()),
  GIT_BASE_URL_GITLAB: z.preprocess(emptyAsUndefined, configFields.GIT_BASE_URL.optional()),
  GIT_BASE_URL_BITBUCKET: z.preprocess(emptyAsUndefined, configFields.GIT_BASE_URL.optional()),
  /**
   * GIT_TOKEN serves every user's clones and pushes (a single-team deployment). Off: each user brings
   * their own token (POST /api/v1/git/providers), and a user without one clones public repositories only.
   */
  GIT_TOKEN_SHARED: flag.default(false),
  /** The providers' REST APIs (pull requests); unset: derived from the provider's host. */
  GIT_API_URL_GITHUB: z.preprocess(emptyAsUndefined, httpUrl.optional()),
  GIT_API_URL_GITLAB: z.preprocess(emptyAsUndefined, httpUrl.optional()),
  GIT_API_URL_BITBUCKET: z.preprocess(emptyAsUndefined, httpUrl.optional()),
  /**
   * A user's own provider `host` may be plain http or resolve to a loopback, private or link-local
   * address. Off by default: such a host would turn the worker's git into a probe of its own network.
   */
  GIT_ALLOW_PRIVATE_HOSTS: flag.default(false),
  /** Largest repository tree (bytes, as a tar) a clone may hand to its sandbox. */
  GIT_CLONE_MAX_MB: z.coerce.number().int().min(1).max(1_048_576).default(4096),
  /**
   * Repository snapshots: after a start's setup script succeeds, its sandbox is kept as
   * an image, and the same user's next start of the same repository, branch, commit, setup script
   * and sandbox image begins from it (no clone, no setup script). Off: every start clones.
   */
  REPO_SNAPSHOTS: flag.default(true),
  /** Snapshots kept per user on one engine, and their disk (MiB); past either, the least recently used go. */
  REPO_SNAPSHOTS_MAX_PER_USER: z.coerce.number().int().min(1).max(10_000).default(5),
  REPO_SNAPSHOTS_MAX_MB_PER_USER: z.coerce.number().int().min(1).max(10_485_760).default(20_480),
  /** The same bounds over all users of one engine. */
  REPO_SNAPSHOTS_MAX_PER_ENGINE: z.coerce.number().int().min(1).max(100_000).default(100),
  REPO_SNAPSHOTS_MAX_MB_PER_ENGINE: z.coerce.number().int().min(1).max(104_857_600).default(102_400),
  /**
   * Output of the agent-server API's bash commands kept in Postgres, in characters: per command
   * (past it the rest is dropped, said in its last event) and per sandbox (past it the sandbox's
   * oldest finished commands leave, outputs and all).
   */
  AGENT_BASH_OUTPUT_MAX_CHARS: z.coerce
    .number()
    .int()
    .min(1024)
    .max(268_435_456)
    .default(4 * 1024 * 1024),
  AGENT_BASH_SANDBOX_OUTPUT_MAX_CHARS: z.coerce
    .number()
    .int()
    .min(1024)
    .max(4_294_967_296)
    .default(64 * 1024 * 1024),
  /** How long a job's lock lasts without renewal: a dead worker's job is taken over after about this long. */
  WORKER_LOCK_DURATION_MS: ms.default(30_000),
  /** How often each worker looks for jobs whose lock expired (stalled). */
  WORKER_STALLED_INTERVAL_MS: ms.default(30_000),
  /** On SIGTERM, how long running jobs get to finish before they are handed back (stalled) to others. */
  WORKER_SHUTDOWN_GRACE_MS: ms.default(25_000),
  JANITOR_INTERVAL_MS: ms.default(30_000),
  /** A warm sandbox whose worker is not alive is kept this long from its creation, in case its owner's key is late. */
  POOL_ORPHAN_GRACE_MS: ms.default(60_000),
  /**
   * Seconds without a live worker of an engine after which its sandboxes count as lost (MISSING;
   * their conversations' follow-ups get 410). Until then their jobs wait for one of its workers.
   */
  ENGINE_LOST_AFTER: z.coerce.number().int().min(1).max(31_536_000).default(600),
  /**
   * The worker's own HTTP server: /health and /ready for orchestrators, and the internal sandbox
   * endpoints the API reads through (the API never talks to the sandbox engine). 0: any free port.
   */
  WORKER_HTTP_PORT: z.coerce.number().int().min(0).max(65535).default(3001),
  WORKER_HTTP_HOST: z.string().min(1).default("0.0.0.0"),
  /**
   * Where the API reaches this worker's server; advertised in Redis. Defaults to this host's name
   * (or WORKER_HTTP_HOST when it is a specific address) and the port listened on.
   */
  WORKER_ADVERTISE_URL: z.preprocess(emptyAsUndefined, httpUrl.optional()),
  WORKER_INTERNAL_TOKEN: configFields.WORKER_INTERNAL_TOKEN,
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

/** One sandbox's limits, the same for a warm pool's sandboxes and a start's own. */
export const sandboxLimitsOf = (config: WorkerConfig): SandboxLimits => ({
  memoryMb: config.SANDBOX_MEMORY_MB,
  cpus: config.SANDBOX_CPUS,
  pids: config.SANDBOX_PIDS_LIMIT,
  nofile: config.SANDBOX_NOFILE,
  nproc: config.SANDBOX_NPROC,
});
