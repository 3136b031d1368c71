import type { Logger } from "@tern/core";
import type { Database } from "@tern/db";
import type { Queues } from "@tern/queue";
import type { Redis } from "ioredis";
import type { Kysely } from "kysely";
import type { ApiConfig } from "./config.ts";

/** Everything a route may use, built once by main.ts (or by a test with its own resources). */
export interface ApiDeps {
  config: ApiConfig & { publicUrl: string; cursorSecret: string };
  db: Kysely<Database>;
  redis: Redis;
  queues: Queues;
  logger: Logger;
}
