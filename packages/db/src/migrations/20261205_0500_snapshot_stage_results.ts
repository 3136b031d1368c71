import { type Kysely, sql } from "kysely";

/**
 * What the start that took a snapshot got from its hook and skill stages (the hooks installed, the
 * skills read, and the skills cap they were read under), for that commit and setup script: a start
 * from the snapshot uses them and runs neither stage's exec (the hook is in the image already).
 * Null on rows taken before this migration: a start from one of those runs both stages.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`alter table repo_snapshots add column stage_results jsonb`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`alter table repo_snapshots drop column if exists stage_results`.execute(db);
}
