import { type Kysely, sql } from "kysely";

/**
 * Confirmation mode. The user's settings name it as OpenHands' do: `confirmation_mode`
 * and `security_analyzer`. A conversation's own policy, which overrides them, has a table of its
 * own (one row per conversation that set one), so the conversations row and its readers stay as
 * they are.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .alterTable("user_settings")
    .addColumn("confirmation_mode", "boolean", (c) => c.notNull().defaultTo(false))
    .addColumn("security_analyzer", "text", (c) => c.notNull().defaultTo("llm"))
    .execute();
  await db.schema
    .createTable("conversation_confirmation_policies")
    .addColumn("conversation_id", "uuid", (c) => c.primaryKey().references("conversations.id").onDelete("cascade"))
    .addColumn("policy", "jsonb", (c) => c.notNull())
    .addColumn("updated_at", "timestamptz", (c) => c.notNull().defaultTo(sql`now()`))
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable("conversation_confirmation_policies").ifExists().execute();
  await db.schema.alterTable("user_settings").dropColumn("confirmation_mode").dropColumn("security_analyzer").execute();
}
