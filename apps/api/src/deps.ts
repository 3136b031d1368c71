import type { Logger } from "@tern/core";
import type { Database } from "@tern/db";
import type { Queues } from "@tern/queue";
import type { Redis } from "ioredis";
import type { Kysely } from "kysely";
import type { ApiConfig } from "./config.ts";
import type { KeyUsage } from "./middleware/key-usage.ts";

/** Everything a route may use, built once by main.ts (or by a test with its own resources). */
export interface ApiDeps {
  config: ApiConfig & { publicUrl: string; cursorSecret: string };
  db: Kysely<Database>;
  redis: Redis;
  queues: Queues;
  logger: Logger;
  /** Batches api_keys.last_used_at writes; main.ts passes one to flush it at shutdown (tests may omit it). */
  keyUsage?: KeyUsage;
}
