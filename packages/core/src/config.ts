import { z } from "zod";
import { hasUrlScheme } from "./schemas/formats.ts";

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
  z.string().refine((v) => hasUrlScheme(v, protocols), {
    message: `must be a URL with scheme ${protocols.map((p) => p.replace(":", "")).join(" or ")}`,
  });

/** The longest an API key may live; the default of API_KEY_MAX_LIFETIME_DAYS, for callers without a config. */
export const DEFAULT_API_KEY_MAX_LIFETIME_DAYS = 365;

/** The reasoning efforts a model may be asked for (ReasoningEffort in OpenAI's OpenAPI document). */
export const reasoningEfforts = ["none", "minimal", "low", "medium", "high", "xhigh"] as const;
export type ReasoningEffort = (typeof reasoningEfforts)[number];

/** A comma-separated list; empty when unset. */
const list = z.preprocess(
  (v) =>
    typeof v === "string"
      ? v
          .split(",")
          .map((s) => s.trim())
          .filter(Boolean)
      : v === undefined
        ? []
        : v,
  z.array(z.string().min(1)),
);

const int = (min: number, max: number) => z.coerce.number().int().min(min).max(max);
const emptyAsUndefined = (v: unknown) => (v === "" ? undefined : v);

/** A JSON object setting, checked by `schema`; unset or empty: `{}`. Text that is not JSON fails the schema. */
const jsonRecord = <T extends z.ZodType>(schema: T) =>
  z.preprocess((v) => {
    if (v === undefined || v === "") return {};
    if (typeof v !== "string") return v;
    try {
      return JSON.parse(v);
    } catch {
      return "not JSON";
    }
  }, schema);

const flag = z.preprocess(
  (v) => (typeof v === "string" ? v.trim().toLowerCase() || undefined : v),
  z.enum(["true", "false", "1", "0", "yes", "no"]).transform((v) => v === "true" || v === "1" || v === "yes"),
);

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
  /** An OTLP/HTTP collector (e.g. http://otel-collector:4318): set, the process exports its traces there. */
  OTEL_EXPORTER_OTLP_ENDPOINT: z.preprocess(emptyAsUndefined, url(["http:", "https:"]).optional()),
  SANDBOX_IMAGE: z.string().min(1).default("tern-sandbox:latest"),
  /**
   * More images offered as sandbox specs beside SANDBOX_IMAGE, comma-separated: any image on the
   * engines (a start's first use of one on an engine builds its runtime image there).
   */
  SANDBOX_IMAGES: list,
  /**
   * The token the API shows the workers' internal HTTP endpoints. Unset: one generated once and
   * kept in Postgres, shared by every process of the deployment. Set it on all of them or none.
   */
  WORKER_INTERNAL_TOKEN: z.preprocess(emptyAsUndefined, z.string().min(32).optional()),
  SANDBOX_MEMORY_MB: int(64, 1_048_576).default(2048),
  SANDBOX_CPUS: z.coerce.number().positive().max(256).default(1),
  SANDBOX_PIDS_LIMIT: int(16, 1_000_000).default(512),
  SANDBOX_NOFILE: int(64, 1_048_576).default(4096),
  // Host-wide for the sandbox uid (RLIMIT_NPROC): a backstop above SANDBOX_PIDS_LIMIT × sandboxes.
  SANDBOX_NPROC: int(64, 4_194_304).default(8192),
  SANDBOX_POOL_SIZE: int(0, 100).default(2),
  /**
   * The warm pool grows up to this many per worker while starts arrive faster than
   * SANDBOX_POOL_SIZE covers (sized from the arrival rate and the refill time), and shrinks back
   * slowly. Unset: SANDBOX_POOL_SIZE, a pool of fixed size.
   */
  SANDBOX_POOL_MAX: z.preprocess(emptyAsUndefined, int(0, 100).optional()),
  /** Creates a pool growing above SANDBOX_POOL_SIZE runs at once (the engine's cores bound what helps). */
  SANDBOX_POOL_PARALLEL_CREATES: int(1, 64).default(2),
  WORKER_CONCURRENCY: int(1, 1000).default(4),
  SETUP_SCRIPT_TIMEOUT: int(1, 86_400).default(600),
  START_TASK_DEADLINE: int(10, 86_400).default(1800),
  GIT_BASE_URL: url(["http:", "https:"]).default("https://github.com"),
  GIT_TOKEN: z.preprocess(emptyAsUndefined, z.string().optional()),
  LLM_PROVIDER: z.preprocess(emptyAsUndefined, z.enum(["openai", "anthropic"]).optional()),
  LLM_BASE_URL: z.preprocess(emptyAsUndefined, url(["http:", "https:"]).optional()),
  LLM_API_KEY: z.preprocess(emptyAsUndefined, z.string().optional()),
  LLM_MODEL: z.preprocess(emptyAsUndefined, z.string().optional()),
  /** Models a conversation may use on the operator's key, comma-separated (`*`: any of LLM_PROVIDER's); unset: LLM_MODEL only. */
  LLM_MODELS: list,
  /** Prices (USD per 1M tokens) added to the built-in table: JSON `{"model": {"input": n, "output": n, "cacheRead"?: n, "cacheWrite"?: n}}`. */
  LLM_PRICES: jsonRecord(
    z.record(
      z.string(),
      z.object({
        input: z.number().nonnegative(),
        output: z.number().nonnegative(),
        cacheRead: z.number().nonnegative().optional(),
        cacheWrite: z.number().nonnegative().optional(),
      }),
    ),
  ),
  /** Each LLM reply's output limit in tokens, over the model table's maximum for the model; unset: the table's. */
  LLM_MAX_OUTPUT_TOKENS: z.preprocess(emptyAsUndefined, int(1, 10_000_000).optional()),
  /** Seconds one LLM call may wait in all for its retries (429, 5xx, 529, a lost connection) before the run ends in error. */
  LLM_RETRY_MAX_WAIT: int(0, 86_400).default(600),
  /** Anthropic's extended-thinking budget in tokens unless a user or a conversation sets one; 0: no thinking. */
  LLM_THINKING_BUDGET: int(0, 10_000_000).default(0),
  /** `reasoning_effort` for the models that take it, unless a user or a conversation sets one; unset: the provider's default. */
  LLM_REASONING_EFFORT: z.preprocess(emptyAsUndefined, z.enum(reasoningEfforts).optional()),
  /** Native tool calls: `auto` (as the model table says of the model), `on`, or `off` (tools described in the prompt). */
  LLM_NATIVE_TOOL_CALLS: z.enum(["auto", "on", "off"]).default("auto"),
  /** USD a conversation may spend on the LLM unless its user set their own max_budget_per_task; unset: no cap. */
  MAX_BUDGET_PER_TASK: z.preprocess(emptyAsUndefined, z.coerce.number().positive().optional()),
  /**
   * The LLM endpoints a user's llm_base_url may name (llm-access.ts): each entry covers URLs of its
   * scheme, host and port under its path, trusted as written (plain http and private addresses
   * included); `*`: any public https URL too. Unset: any public https URL.
   */
  LLM_USER_BASE_URLS: list.refine(
    (entries) => entries.every((e) => e === "*" || hasUrlScheme(e, ["http:", "https:"])),
    {
      message: "each entry must be * or an http(s) URL",
    },
  ),
  MAX_ITERATIONS: int(1, 10_000).default(500),
  API_KEY_MAX_LIFETIME_DAYS: int(1, 36_500).default(DEFAULT_API_KEY_MAX_LIFETIME_DAYS),
  CURSOR_SECRET: z.preprocess(emptyAsUndefined, z.string().min(16).optional()),
  /** Keys that seal what users hand us (secret-box.ts): comma-separated, the first one seals. */
  SECRETS_KEY: z.preprocess(emptyAsUndefined, z.string().optional()),
  /** Where a local deployment without SECRETS_KEY keeps the key generated on its first start (mode 0600). */
  SECRETS_KEY_FILE: z.string().min(1).default(".tern/secrets.key"),
  // Tenancy limits: each bounds what one tenant may take; 0 turns a limit off.
  /** Requests per minute per key, whatever the route. */
  RATE_LIMIT_PER_MINUTE: int(0, 1_000_000).default(600),
  /** Conversation starts per minute per key (on top of the general limit). */
  RATE_LIMIT_STARTS_PER_MINUTE: int(0, 1_000_000).default(10),
  /** Messages to the agent per minute per key (on top of the general limit). */
  RATE_LIMIT_MESSAGES_PER_MINUTE: int(0, 1_000_000).default(60),
  /** Live sandboxes (not MISSING or ERROR, starts in flight included) per user; OpenHands' default is 5. */
  MAX_SANDBOXES_PER_USER: int(0, 100_000).default(5),
  MAX_STARTS_IN_FLIGHT_PER_USER: int(0, 100_000).default(3),
  /** Live (not revoked, not expired) API keys per user. */
  MAX_KEYS_PER_USER: int(0, 100_000).default(10),
  /** UTF-8 bytes of text in one message to the agent. */
  MAX_MESSAGE_BYTES: int(0, 16 * 1024 * 1024).default(64 * 1024),
  MAX_EVENTS_PER_CONVERSATION: int(0, 100_000_000).default(10_000),
  /** Bytes of all of a repository's skill files together. */
  MAX_SKILLS_BYTES: int(0, 64 * 1024 * 1024).default(256 * 1024),
  /** Seconds without events or runs after which a conversation's sandbox is paused. */
  SANDBOX_IDLE_PAUSE: int(0, 31_536_000).default(1800),
  /** Seconds after its creation at which a sandbox is removed, once no run works in it. */
  SANDBOX_MAX_AGE: int(0, 31_536_000).default(86_400),
  /** Events in the model's view above which the condenser summarizes the middle (OpenHands' default agent: 80); 0: off. */
  AGENT_CONDENSER_MAX_EVENTS: int(0, 100_000)
    .refine((n) => n === 0 || n >= 8, "0 (off) or at least 8")
    .default(80),
  /** Talk-only responses in a row (answers, `think` calls) that make a stuck monologue; 0: off. */
  AGENT_STUCK_MONOLOGUE: int(0, 10_000).default(6),
  /** Context windows (tokens) added to the built-in table: JSON `{"model": tokens}`. */
  LLM_CONTEXT_WINDOWS: jsonRecord(z.record(z.string(), z.number().int().positive())),
  /** Webhook URLs on private, loopback, link-local or otherwise non-public addresses (API and worker). */
  WEBHOOK_ALLOW_PRIVATE: flag.default(false),
  /** Webhook URLs over plain http (API and worker). */
  WEBHOOK_ALLOW_HTTP: flag.default(false),
  /** MCP server URLs on private, loopback, link-local or otherwise non-public addresses (API and worker). */
  MCP_ALLOW_PRIVATE: flag.default(false),
  /** MCP server URLs over plain http (API and worker). */
  MCP_ALLOW_HTTP: flag.default(false),
  /** MCP servers in one user's mcp_config (API: 422 past it; worker: the first ones only). */
  MCP_MAX_SERVERS: int(0, 1_000).default(20),
  /** MCP tools offered to the model in all, over all of a user's servers. */
  MCP_MAX_TOOLS: int(0, 10_000).default(200),
  /** How long one MCP tool call may take, in ms. */
  MCP_CALL_TIMEOUT_MS: int(100, 3_600_000).default(120_000),
  /** How long an MCP server may take to connect and list its tools at a run's start, in ms. */
  MCP_CONNECT_TIMEOUT_MS: int(100, 600_000).default(20_000),
  /** How long the start-up of all of a run's MCP servers together may take, in ms; a server past it is left out. */
  MCP_STARTUP_TIMEOUT_MS: int(100, 3_600_000).default(60_000),
  /** Bytes of one message a remote MCP server answers; past it the answer is cut and the request fails. */
  MCP_MAX_RESPONSE_BYTES: int(1_024, 1_073_741_824).default(8 * 1024 * 1024),
  /** Webhooks per user. 0: off. */
  MAX_WEBHOOKS_PER_USER: int(0, 100_000).default(20),
  /** How long one webhook delivery try may take, in ms. */
  WEBHOOK_TIMEOUT_MS: int(100, 120_000).default(10_000),
  /** First retry delay of a failed delivery, in ms; doubles at each try up to WEBHOOK_RETRY_MAX_DELAY_MS. */
  WEBHOOK_RETRY_BASE_MS: int(10, 3_600_000).default(5_000),
  WEBHOOK_RETRY_MAX_DELAY_MS: int(10, 86_400_000).default(3_600_000),
  /** How long after its state change a delivery is retried before it is marked failed, in ms. */
  WEBHOOK_RETRY_WINDOW_MS: int(1_000, 7 * 86_400_000).default(86_400_000),
  /** How often each worker looks for due webhook deliveries in the outbox, in ms. */
  WEBHOOK_SWEEP_INTERVAL_MS: int(50, 600_000).default(1_000),
} as const;

/** Parses `env` once with `schema`; the first bad variable stops the process with its name. */
export const parseConfig = <S extends z.ZodObject>(schema: S, env: Record<string, string | undefined>): z.infer<S> => {
  const result = schema.safeParse(env);
  if (result.success) return result.data;
  const issue = result.error.issues[0];
  const variable = String(issue?.path[0] ?? "environment");
  throw new ConfigError(variable, issue?.message ?? "invalid");
};
