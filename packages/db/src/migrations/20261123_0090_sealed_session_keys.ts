import { type Kysely, sql } from "kysely";

/**
 * Session keys are no longer stored in plaintext. A new key is stored as its SHA-256
 * (`session_api_key_hash`, the lookup) and sealed in the secret box (`session_api_key_sealed`, so
 * its owner can read it back). The plaintext column stays, nullable and unique no more, only until
 * the api seals what older rows hold at its start (`sealPlaintextSessionKeys`): SQL cannot,
 * as SECRETS_KEY never reaches the database. A revoked key loses its plaintext here at once.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable("conversations").addColumn("session_api_key_sealed", "text").execute();
  await sql`alter table conversations alter column session_api_key drop not null`.execute(db);
  await sql`alter table conversations drop constraint if exists conversations_session_api_key_key`.execute(db);
  await sql`update conversations set session_api_key = null where session_revoked_at is not null`.execute(db);
}

/** Keys sealed since cannot be put back in plaintext: those conversations' records show none. */
export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable("conversations").dropColumn("session_api_key_sealed").execute();
}
