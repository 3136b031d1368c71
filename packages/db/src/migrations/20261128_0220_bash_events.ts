import { type Kysely, sql } from "kysely";

/**
 * The agent-server's bash commands: `/api/bash/start_bash_command` and its outputs,
 * outside the agent's event history. One row per event as OpenHands' BashEventService keeps one
 * file per event: a BashCommand, then its BashOutput chunks (the last one carries the exit code).
 * Kept in Postgres so that a poll served by another API replica, or after the worker running the
 * command died, still finds them. `position` is the emission order (search's sort and page ids).
 * A command row says which worker (and when) took it, so one whose worker died is finished with an
 * error exit instead of running forever; `finished_at` is set with its last output.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable("bash_events")
    .addColumn("id", "uuid", (c) => c.primaryKey())
    .addColumn("position", "bigserial", (c) => c.notNull().unique())
    .addColumn("sandbox_id", "uuid", (c) => c.notNull().references("sandboxes.id").onDelete("cascade"))
    .addColumn("kind", "text", (c) => c.notNull().check(sql`kind in ('BashCommand', 'BashOutput')`))
    .addColumn("command_id", "uuid")
    .addColumn("timestamp", "timestamptz", (c) => c.notNull())
    .addColumn("command", "text")
    .addColumn("cwd", "text")
    .addColumn("timeout", "integer")
    .addColumn("order", "integer")
    .addColumn("exit_code", "integer")
    .addColumn("stdout", "text")
    .addColumn("stderr", "text")
    .addColumn("worker_id", "text")
    .addColumn("dispatched_at", "timestamptz")
    .addColumn("finished_at", "timestamptz")
    .execute();
  await db.schema
    .createIndex("bash_events_sandbox_idx")
    .on("bash_events")
    .columns(["sandbox_id", "position"])
    .execute();
  await db.schema
    .createIndex("bash_events_command_idx")
    .on("bash_events")
    .columns(["command_id", "position"])
    .where(sql.ref("command_id"), "is not", null)
    .execute();
  await db.schema
    .createIndex("bash_events_running_idx")
    .on("bash_events")
    .column("sandbox_id")
    .where(sql<boolean>`kind = 'BashCommand' and finished_at is null`)
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable("bash_events").ifExists().execute();
}
