import type { Database } from "@tern/db";
import { type Kysely, sql } from "kysely";

/** Whether Postgres answers a trivial query now (readiness); rejects when it does not. */
export const pingDatabase = async (deps: { db: Kysely<Database> }): Promise<void> => {
  await sql`select 1`.execute(deps.db);
};
