import { type Kysely, sql } from "kysely";

/**
 * Session keys: looked up by their SHA-256 (`session_api_key_hash`, unique), and revoked
 * when the conversation is deleted (`session_revoked_at`): a revoked key authenticates nothing.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .alterTable("conversations")
    .addColumn("session_api_key_hash", "text")
    .addColumn("session_revoked_at", "timestamptz")
    .execute();
  await sql`update conversations set session_api_key_hash = encode(sha256(convert_to(session_api_key, 'UTF8')), 'hex')`.execute(
    db,
  );
  await sql`create unique index conversations_session_key_hash_idx on conversations (session_api_key_hash)`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`drop index if exists conversations_session_key_hash_idx`.execute(db);
  await db.schema
    .alterTable("conversations")
    .dropColumn("session_api_key_hash")
    .dropColumn("session_revoked_at")
    .execute();
}
