import type { Logger, Resolver, SecretBox } from "@tern/core";
import type { Database } from "@tern/db";
import type { Queues } from "@tern/queue";
import type { QueueEvents } from "bullmq";
import type { Redis } from "ioredis";
import type { Kysely } from "kysely";

/**
 * What the domain operations may use. Each operation asks only for the part it needs, so a caller
 * passes what it has: the API its own deps (they have this shape), the CLI, a test or the bench
 * one built of their own resources.
 */
export interface ServiceDeps {
  db: Kysely<Database>;
  queues: Queues;
  /**
   * The connection the queues add jobs through. While it is not `ready`, an operation that needs
   * the queue fails fast (UnavailableError) rather than waits for it: the API answers 503 at once.
   */
  redis: Pick<Redis, "status">;
  logger: Logger;
  /** How long the queue may take to answer before it counts as unreachable; 5 s unless given. */
  queueTimeoutMs?: number;
  /**
   * What one tenant may take. The API always passes its configuration's; without it (the
   * operator's own tools: the bench, tests) nothing is limited.
   */
  limits?: TenantLimits;
  /** Seals what users hand us (the start request's secrets); needed by a start that carries secrets. */
  secretBox?: SecretBox;
  /**
   * The operator's models (LLM_PROVIDER, LLM_MODEL, LLM_MODELS) as this process knows them: a start
   * naming a model LLM_MODELS does not offer is refused here (422); absent, the worker refuses it.
   */
  llmModels?: { LLM_PROVIDER?: string | undefined; LLM_MODEL?: string | undefined; LLM_MODELS?: readonly string[] };
  /**
   * How many workers are alive to take a start (the worker directory). A start accepted while none
   * is says so on its task (`detail`). Absent (a test, the bench): not asked.
   */
  workersAlive?: () => Promise<number>;
  /**
   * Told once a start accepted while no worker is alive has committed (the API's worker presence
   * then counts it and logs it at once, not at its next look).
   */
  onStartWaiting?: () => void;
  /**
   * Name resolution for the URLs users name (an LLM endpoint), for tests: a hosts mapping, never
   * real DNS there. The system resolver by default.
   */
  resolve?: Resolver;
}

/** Per-user and per-conversation bounds; 0 turns one off. */
export interface TenantLimits {
  /** Live sandboxes (starts in flight included): MAX_SANDBOXES_PER_USER. */
  maxSandboxesPerUser: number;
  /** MAX_STARTS_IN_FLIGHT_PER_USER. */
  maxStartsInFlightPerUser: number;
  /** UTF-8 bytes of text in one message to the agent: MAX_MESSAGE_BYTES. */
  maxMessageBytes: number;
  /** MAX_EVENTS_PER_CONVERSATION. */
  maxEventsPerConversation: number;
}

/** What an operation that adds jobs needs. */
export type QueueDeps = Pick<ServiceDeps, "queues" | "redis" | "logger" | "queueTimeoutMs">;

/** What an operation on a conversation needs: the database, and the queue to ask for work. */
export type ConversationDeps = Pick<ServiceDeps, "db" | "limits" | "secretBox"> & QueueDeps;

/** Issuing keys: the lifetime cap is the issuer's configuration (API_KEY_MAX_LIFETIME_DAYS). */
export interface KeyDeps {
  db: Kysely<Database>;
  maxKeyLifetimeDays: number;
  /** Live keys a user may hold (MAX_KEYS_PER_USER); absent or 0: no quota. */
  maxKeysPerUser?: number;
}

/** A credential that stopped being valid: one key, or every key of a user. */
export type CredentialChange = { keyId: string } | { userId: string };

/**
 * Tells every API replica that a credential changed, so the keys they cache (the API's key cache)
 * drop it at once. Every operation that revokes, deletes or narrows a key or a user calls it once
 * the change is committed; a caller without a cache (the CLI, a test) passes none.
 */
export interface CredentialEvents {
  publish: (change: CredentialChange) => Promise<void>;
}

/**
 * Commands that change a sandbox (pause, resume, removal): jobs of the `sandbox` queue, whose
 * results the caller waits for through the events of that queue.
 */
export type SandboxCommandDeps = ConversationDeps & {
  sandboxEvents: QueueEvents;
  /** How long a caller waits for a command to take effect before it answers 503; 30 s unless given. */
  sandboxCommandTimeoutMs?: number;
};

/**
 * How a process that does not drive sandboxes (the API) reaches the workers that do: the worker
 * directory in Redis under `prefix`, and the token their internal endpoints want.
 */
export interface WorkerAccess {
  prefix: string;
  token: string;
  /** How long a worker may take to answer; 30 s unless given. */
  timeoutMs?: number;
}

/** Reads that need a sandbox, served by a worker. */
export interface WorkerReadDeps {
  db: Kysely<Database>;
  redis: Pick<Redis, "zrangebyscore" | "mget">;
  logger: Logger;
  workerAccess: WorkerAccess;
}
