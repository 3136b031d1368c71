import type { Kysely } from "kysely";

/** The setup script's output (capped), kept on the start task so a failed or slow setup can be read back. */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable("start_tasks").addColumn("setup_output", "text").execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable("start_tasks").dropColumn("setup_output").execute();
}
