import { type Kysely, sql } from "kysely";

/**
 * Agent runs. `conversations.active_run_id` is the run lock of a conversation (at most one run at a
 * time); `run_attempt` is bumped each time a worker (re)takes the run, and every write of the run
 * carries it, so a worker that lost the run (stalled, then revived) is refused. `agent_runs` keeps
 * one row per run, so a job BullMQ delivers again after its run ended does not run it twice.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .alterTable("conversations")
    .addColumn("active_run_id", "uuid")
    .addColumn("run_attempt", "integer", (c) => c.notNull().defaultTo(0))
    .execute();
  await db.schema
    .createTable("agent_runs")
    .addColumn("id", "uuid", (c) => c.primaryKey())
    .addColumn("conversation_id", "uuid", (c) => c.notNull().references("conversations.id").onDelete("cascade"))
    .addColumn("status", "text", (c) => c.notNull())
    .addColumn("attempts", "integer", (c) => c.notNull().defaultTo(0))
    .addColumn("started_at", "timestamptz", (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn("ended_at", "timestamptz")
    .execute();
  await db.schema
    .createIndex("agent_runs_conversation_idx")
    .on("agent_runs")
    .columns(["conversation_id", "started_at"])
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable("agent_runs").ifExists().execute();
  await db.schema.alterTable("conversations").dropColumn("active_run_id").dropColumn("run_attempt").execute();
}
