import { configFields, parseConfig } from "@tern/core";
import type { TenantLimits } from "@tern/services";
import { z } from "zod";

const apiConfigSchema = z.object({
  PORT: configFields.PORT,
  HOST: configFields.HOST,
  PUBLIC_URL: configFields.PUBLIC_URL,
  /**
   * Where clients reach the agent-server API of sandbox S: `{AGENT_SERVER_BASE_URL}/{S}` (a reverse
   * proxy may route another host there); unset, `{PUBLIC_URL}/agent`, which this API serves.
   */
  AGENT_SERVER_BASE_URL: configFields.PUBLIC_URL,
  OTEL_EXPORTER_OTLP_ENDPOINT: configFields.OTEL_EXPORTER_OTLP_ENDPOINT,
  DATABASE_URL: configFields.DATABASE_URL,
  REDIS_URL: configFields.REDIS_URL,
  REDIS_PREFIX: configFields.REDIS_PREFIX,
  LOG_LEVEL: configFields.LOG_LEVEL,
  /**
   * The request log (one info line per request): `all`, every request; `errors`, only those that
   * answered 4xx/5xx or took ACCESS_LOG_SLOW_MS or more (the metrics count every request anyway).
   */
  ACCESS_LOG: z.enum(["all", "errors"]).default("errors"),
  ACCESS_LOG_SLOW_MS: z.coerce.number().int().min(0).max(600_000).default(1_000),
  API_KEY_MAX_LIFETIME_DAYS: configFields.API_KEY_MAX_LIFETIME_DAYS,
  CURSOR_SECRET: configFields.CURSOR_SECRET,
  SECRETS_KEY: configFields.SECRETS_KEY,
  SECRETS_KEY_FILE: configFields.SECRETS_KEY_FILE,
  // What the API checks of a start's or a user's llm_model (the worker checks it again, with LLM_MODEL).
  LLM_PROVIDER: configFields.LLM_PROVIDER,
  LLM_MODELS: configFields.LLM_MODELS,
  LLM_USER_BASE_URLS: configFields.LLM_USER_BASE_URLS,
  // The images listed as sandbox specs (GET /api/v1/sandbox-specs); the workers make sandboxes of SANDBOX_IMAGE.
  SANDBOX_IMAGE: configFields.SANDBOX_IMAGE,
  SANDBOX_IMAGES: configFields.SANDBOX_IMAGES,
  WORKER_INTERNAL_TOKEN: configFields.WORKER_INTERNAL_TOKEN,
  /**
   * How long a resolved API key is trusted without Postgres (revocations reach every replica at
   * once by pub/sub; this bounds a missed one). 0: no cache, every request looks its key up.
   */
  API_KEY_CACHE_TTL_MS: z.coerce.number().int().min(0).max(300_000).default(30_000),
  /** How long a sandbox command (pause, resume, delete) may take to complete before the answer is 503. */
  SANDBOX_COMMAND_TIMEOUT_MS: z.coerce.number().int().min(100).max(600_000).default(30_000),
  RATE_LIMIT_PER_MINUTE: configFields.RATE_LIMIT_PER_MINUTE,
  RATE_LIMIT_STARTS_PER_MINUTE: configFields.RATE_LIMIT_STARTS_PER_MINUTE,
  RATE_LIMIT_MESSAGES_PER_MINUTE: configFields.RATE_LIMIT_MESSAGES_PER_MINUTE,
  MAX_SANDBOXES_PER_USER: configFields.MAX_SANDBOXES_PER_USER,
  MAX_STARTS_IN_FLIGHT_PER_USER: configFields.MAX_STARTS_IN_FLIGHT_PER_USER,
  MAX_KEYS_PER_USER: configFields.MAX_KEYS_PER_USER,
  WEBHOOK_ALLOW_PRIVATE: configFields.WEBHOOK_ALLOW_PRIVATE,
  WEBHOOK_ALLOW_HTTP: configFields.WEBHOOK_ALLOW_HTTP,
  MAX_WEBHOOKS_PER_USER: configFields.MAX_WEBHOOKS_PER_USER,
  MCP_ALLOW_PRIVATE: configFields.MCP_ALLOW_PRIVATE,
  MCP_ALLOW_HTTP: configFields.MCP_ALLOW_HTTP,
  MCP_MAX_SERVERS: configFields.MCP_MAX_SERVERS,
  MAX_MESSAGE_BYTES: configFields.MAX_MESSAGE_BYTES,
  MAX_EVENTS_PER_CONVERSATION: configFields.MAX_EVENTS_PER_CONVERSATION,
  /** Event streams (SSE, WebSocket): a comment this often keeps proxies from closing an idle stream. */
  STREAM_HEARTBEAT_MS: z.coerce.number().int().min(50).max(300_000).default(15_000),
  /** Bytes a stream may hold for a client that reads slower than events come; reads pause past it. */
  STREAM_BUFFER_BYTES: z.coerce
    .number()
    .int()
    .min(1024)
    .max(64 * 1024 * 1024)
    .default(256 * 1024),
  /** How long a client may stay behind a full buffer before it is disconnected (it resumes from its last id). */
  STREAM_SLOW_CLIENT_MS: z.coerce.number().int().min(50).max(600_000).default(30_000),
  /** How long the conversation page's session cookie lasts. */
  PAGE_SESSION_TTL_SECONDS: z.coerce
    .number()
    .int()
    .min(60)
    .max(7 * 86_400)
    .default(8 * 3600),
  /** The largest file the agent-server API takes (`POST /agent/{sandbox}/api/file/upload`); past it 413. */
  AGENT_FILE_UPLOAD_MAX_BYTES: z.coerce
    .number()
    .int()
    .min(1)
    .max(1024 * 1024 * 1024)
    .default(100 * 1024 * 1024),
  /** Bash commands of the agent-server API running at once in one sandbox; past it 429. 0: off. */
  AGENT_BASH_MAX_IN_FLIGHT: z.coerce.number().int().min(0).max(10_000).default(8),
  /**
   * How long `execute_bash_command` holds its request (seconds): a command still running then is
   * answered with its output so far (exit_code null) and goes on, its end read by polling.
   */
  AGENT_BASH_EXECUTE_MAX_S: z.coerce.number().int().min(1).max(86_400).default(300),
});

export type ApiConfig = z.infer<typeof apiConfigSchema>;

/** The quotas and caps the services enforce for this API's callers. */
export const tenantLimitsOf = (config: ApiConfig): TenantLimits => ({
  maxSandboxesPerUser: config.MAX_SANDBOXES_PER_USER,
  maxStartsInFlightPerUser: config.MAX_STARTS_IN_FLIGHT_PER_USER,
  maxMessageBytes: config.MAX_MESSAGE_BYTES,
  maxEventsPerConversation: config.MAX_EVENTS_PER_CONVERSATION,
});

export const loadApiConfig = (env: Record<string, string | undefined>): ApiConfig => parseConfig(apiConfigSchema, env);
