import { type Kysely, sql } from "kysely";

/**
 * The sandbox a snapshot is being committed from. A start answers READY while its
 * snapshot's commit still runs; until that row is complete, the agent's calls into that sandbox wait
 * (what they did would be in the image). Null on rows begun before this migration.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`alter table repo_snapshots add column source_sandbox text`.execute(db);
  // Only commits under way are looked up by it: the index holds those alone.
  await sql`create index repo_snapshots_pending_source on repo_snapshots (source_sandbox) where image = ''`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`drop index if exists repo_snapshots_pending_source`.execute(db);
  await sql`alter table repo_snapshots drop column if exists source_sandbox`.execute(db);
}
