import { type Kysely, sql } from "kysely";
import { loadSqlCommands } from "../sql.ts";

/**
 * A sandbox's agent-server bash events are purged with it (sql/tern_bash_purge.sql: a trigger on
 * its status becoming MISSING or ERROR), and the ones left behind by sandboxes already gone are
 * purged now.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await loadSqlCommands(db, ["tern_bash_purge"]);
  await sql`delete from bash_events e using sandboxes s
    where s.id = e.sandbox_id and s.status in ('MISSING', 'ERROR')`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`drop trigger if exists sandboxes_bash_purge on sandboxes`.execute(db);
  await sql`drop function if exists tern_bash_purge()`.execute(db);
}
