import { type Kysely, sql } from "kysely";

/**
 * Tenancy limits.
 * - `sandboxes.idle_paused_at`: set while the janitor holds a sandbox paused for idleness, so the
 *   next agent run knows it may resume it (a pause asked for by the user is left alone).
 * - The per-user quota counts read two small sets: a user's starts in flight, and the live
 *   sandboxes (bounded by the hosts' capacity, not by history). Both get partial indexes, so a
 *   start costs the same however many conversations its user made before. The janitor's idle and
 *   age sweeps scan the live sandboxes through the same index.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable("sandboxes").addColumn("idle_paused_at", "timestamptz").execute();
  await sql`create index start_tasks_user_inflight_idx on start_tasks (user_id) where status not in ('READY', 'ERROR')`.execute(
    db,
  );
  await sql`create index sandboxes_live_idx on sandboxes (start_task_id) where status in ('STARTING', 'RUNNING', 'PAUSED')`.execute(
    db,
  );
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`drop index if exists sandboxes_live_idx`.execute(db);
  await sql`drop index if exists start_tasks_user_inflight_idx`.execute(db);
  await db.schema.alterTable("sandboxes").dropColumn("idle_paused_at").execute();
}
