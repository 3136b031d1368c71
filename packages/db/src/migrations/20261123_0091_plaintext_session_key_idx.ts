import { type Kysely, sql } from "kysely";

/**
 * What the API looks for at every start (sealPlaintextSessionKeys): conversations whose session key
 * is still in plaintext. None once sealed, so with this partial index each later start's look is
 * an empty index read, not a scan of every conversation.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`create index conversations_plaintext_session_key_idx on conversations (id) where session_api_key is not null`.execute(
    db,
  );
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`drop index if exists conversations_plaintext_session_key_idx`.execute(db);
}
