import type { Kysely } from "kysely";
import { loadSqlCommands } from "../sql.ts";

/**
 * One definition of a user's work in progress (sql/tern_work_in_progress.sql: starts in flight and
 * agent-server runs not ended), which MAX_STARTS_IN_FLIGHT_PER_USER bounds; tern_warm_claim is
 * loaded again to count with it.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await loadSqlCommands(db, ["tern_work_in_progress", "tern_warm_claim"]);
}

/** tern_warm_claim, as its file defines it, calls tern_work_in_progress: both stay. */
export async function down(): Promise<void> {}
