import type { Logger } from "@tern/core";
import type { Database } from "@tern/db";
import type { Queues } from "@tern/queue";
import type { SandboxDriver, SandboxPool } from "@tern/sandbox";
import type { Redis } from "ioredis";
import type { Kysely } from "kysely";
import type { WorkerConfig } from "./config.ts";

/** Everything a processor may use, built once by main.ts (or by a test with its own resources). */
export interface WorkerDeps {
  config: WorkerConfig;
  db: Kysely<Database>;
  /** Worker-role connection (maxRetriesPerRequest null), shared by queues. */
  redis: Redis;
  queues: Queues;
  sandboxes: SandboxDriver;
  /** Present when SANDBOX_POOL_SIZE > 0. */
  pool: SandboxPool | null;
  logger: Logger;
}
