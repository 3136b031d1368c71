import { type Kysely, sql } from "kysely";

/**
 * Workers on many hosts: each sandbox lives on one engine, and only that engine's
 * workers reach it.
 * - `sandboxes.engine_id`: the engine that holds the sandbox (null: a driver without affinity, or
 *   a row from before; a worker that finds the container on its engine fills it in).
 * - `sandboxes.engine_lost_at`: set when the sandbox was marked MISSING because its engine had no
 *   worker alive for ENGINE_LOST_AFTER, so a follow-up can say why (410).
 * - `engines`: each engine's last sign of life (its workers' heartbeat), in Postgres so a lost
 *   Redis never makes every engine look gone; `lost_at` once it was given up on.
 * The live sandboxes of an engine are one index read away (the lost-engine sweep, the janitor's).
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .alterTable("sandboxes")
    .addColumn("engine_id", "text")
    .addColumn("engine_lost_at", "timestamptz")
    .execute();
  await sql`create index sandboxes_engine_live_idx on sandboxes (engine_id) where status in ('STARTING', 'RUNNING', 'PAUSED')`.execute(
    db,
  );
  await db.schema
    .createTable("engines")
    .addColumn("id", "text", (c) => c.primaryKey())
    .addColumn("first_seen_at", "timestamptz", (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn("last_seen_at", "timestamptz", (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn("lost_at", "timestamptz")
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable("engines").ifExists().execute();
  await sql`drop index if exists sandboxes_engine_live_idx`.execute(db);
  await db.schema.alterTable("sandboxes").dropColumn("engine_lost_at").dropColumn("engine_id").execute();
}
