import { type Kysely, sql } from "kysely";

/**
 * A sandbox's owner, on the sandbox row: the user of the start task that made it (and so of its
 * conversation). Derivable through the task, but the sandboxes listing pages a user's sandboxes
 * newest first, and that wants one index (read backwards), not a join filtered after the sort.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .alterTable("sandboxes")
    .addColumn("user_id", "uuid", (c) => c.references("users.id").onDelete("cascade"))
    .execute();
  await sql`
    update sandboxes s
    set user_id = coalesce(
      (select c.user_id from conversations c where c.id = s.conversation_id),
      (select t.user_id from start_tasks t where t.id = s.start_task_id)
    )
  `.execute(db);
  await db.schema
    .createIndex("sandboxes_user_created_idx")
    .on("sandboxes")
    .columns(["user_id", "created_at", "id"])
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropIndex("sandboxes_user_created_idx").ifExists().execute();
  await db.schema.alterTable("sandboxes").dropColumn("user_id").execute();
}
