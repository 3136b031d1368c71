import type { Logger, Resolver, SecretBox } from "@tern/core";
import type { Database } from "@tern/db";
import type { Queues, WorkerEndpoint } from "@tern/queue";
import type { TenantLimits, WorkerAccess } from "@tern/services";
import type { QueueEvents } from "bullmq";
import type { Redis } from "ioredis";
import type { Kysely } from "kysely";
import type { ApiConfig } from "./config.ts";
import type { KeyCache } from "./middleware/key-cache.ts";
import type { KeyUsage } from "./middleware/key-usage.ts";
import type { RateLimiter } from "./middleware/rate-limit.ts";
import type { StreamHub } from "./routes/streams/event-pump.ts";

/** Everything a route may use, built once by main.ts (or by a test with its own resources). */
export interface ApiDeps {
  config: ApiConfig & { publicUrl: string; cursorSecret: string };
  /**
   * The spec a start without a repository claims a warm row of; createApp fills it
   * with SANDBOX_IMAGE.
   */
  warmSpec?: string;
  db: Kysely<Database>;
  redis: Redis;
  queues: Queues;
  logger: Logger;
  /** Seals and opens what users hand us (secrets, tokens, keys) for storage. */
  secretBox: SecretBox;
  /** Batches api_keys.last_used_at writes; main.ts passes one to flush it at shutdown (tests may omit it). */
  keyUsage?: KeyUsage;
  /**
   * API keys resolved without Postgres, invalidated on every replica by pub/sub (main.ts builds one
   * unless API_KEY_CACHE_TTL_MS is 0; absent: every request looks its key up).
   */
  keyCache?: KeyCache;
  /** The `sandbox` queue's events: a sandbox command is answered once its job completed. */
  sandboxEvents: QueueEvents;
  /** How the reads that need a sandbox reach a worker (the API never talks to the sandbox engine). */
  workerAccess: WorkerAccess;
  /** SANDBOX_COMMAND_TIMEOUT_MS, under the services' name. */
  sandboxCommandTimeoutMs?: number;
  /** The services' quotas and caps; createApp fills them from `config`. */
  limits?: TenantLimits;
  /** The operator's allowed models (LLM_MODELS); createApp fills them from `config`. */
  llmModels?: { LLM_PROVIDER?: string | undefined; LLM_MODELS?: readonly string[] };
  /** Per-key rate limits; createApp builds them on `redis` from `config` unless given (null: none). */
  rateLimiter?: RateLimiter | null;
  /** Live streams (SSE, WebSocket) and the change feed behind them; without it streams answer 503. */
  streams?: StreamHub;
  /**
   * The workers alive now (the worker directory; main.ts passes it). With it, /ready names them and
   * a start accepted while none is alive says so on its task. Absent (tests without workers): neither.
   */
  workerDirectory?: () => Promise<WorkerEndpoint[]>;
  /** How many workers are alive, for the services; createApp derives it from `workerDirectory`. */
  workersAlive?: () => Promise<number>;
  /** Told when a start accepted while no worker is alive has committed (main.ts: the worker presence looks). */
  onStartWaiting?: () => void;
  /** Name resolution for the URLs users name, for tests (a hosts mapping); the system resolver by default. */
  resolve?: Resolver;
}
