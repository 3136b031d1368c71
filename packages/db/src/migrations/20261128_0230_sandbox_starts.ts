import { type Kysely, sql } from "kysely";

/**
 * A sandbox without a conversation (POST /api/v1/sandboxes):
 * - `start_tasks.kind`: 'sandbox' for the start task that makes such a sandbox (its worker stops
 *   after WAITING_FOR_SANDBOX), so it is retried, swept, counted against the quotas and given a
 *   warm sandbox exactly as a conversation's start is; 'conversation' for every other task.
 * - the sandbox's own session key, stored as the conversations' are: looked up by its SHA-256
 *   (unique), sealed in the secret box for its owner to read back.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .alterTable("start_tasks")
    .addColumn("kind", "text", (c) =>
      c.notNull().defaultTo("conversation").check(sql`kind in ('conversation', 'sandbox')`),
    )
    .execute();
  await db.schema
    .alterTable("sandboxes")
    .addColumn("session_api_key_hash", "text")
    .addColumn("session_api_key_sealed", "text")
    .execute();
  await sql`create unique index sandboxes_session_key_hash_idx on sandboxes (session_api_key_hash)`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`drop index if exists sandboxes_session_key_hash_idx`.execute(db);
  await db.schema
    .alterTable("sandboxes")
    .dropColumn("session_api_key_hash")
    .dropColumn("session_api_key_sealed")
    .execute();
  await db.schema.alterTable("start_tasks").dropColumn("kind").execute();
}
