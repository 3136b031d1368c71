import type { Logger, SecretBox } from "@tern/core";
import type { Database } from "@tern/db";
import type { Queues } from "@tern/queue";
import type { SandboxDriver, SandboxPool } from "@tern/sandbox";
import type { Redis } from "ioredis";
import type { Kysely } from "kysely";
import type { RunInterrupts } from "./agent/run-interrupts.ts";
import type { WorkerConfig } from "./config.ts";

/** Everything a processor may use, built once by main.ts (or by a test with its own resources). */
export interface WorkerDeps {
  config: WorkerConfig;
  db: Kysely<Database>;
  /** Worker-role connection (maxRetriesPerRequest null), shared by queues. */
  redis: Redis;
  queues: Queues;
  sandboxes: SandboxDriver;
  /**
   * The engine this worker's driver drives, when its sandboxes have affinity (PreparedSandboxes):
   * sandboxes it makes are recorded there, and it takes that engine's queues besides the shared
   * ones. Null: every worker reaches every sandbox, and only the shared queues exist.
   */
  engineId: string | null;
  /** Present when SANDBOX_POOL_SIZE > 0. */
  pool: SandboxPool | null;
  logger: Logger;
  /** Opens what the API sealed (secrets, tokens, keys) when a job needs it. */
  secretBox: SecretBox;
  /** The agent runs this worker holds, which the user's interrupt stops (absent: runs stop between steps). */
  runInterrupts?: RunInterrupts;
  /**
   * Aborted when the worker's shutdown grace (WORKER_SHUTDOWN_GRACE_MS) is over: whatever a run
   * waits on (a terminal command, the LLM) stops waiting, and the run is handed back.
   */
  stopping?: AbortSignal;
}
