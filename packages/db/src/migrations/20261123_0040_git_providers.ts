import { type Kysely, sql } from "kysely";

/**
 * Each user's own git accounts: one token per provider, sealed by the secret box (the
 * column never holds a token in clear), with the host of a self-hosted GitLab or GitHub Enterprise.
 * And the pull requests the agent opened, per conversation: the worker writes one row per request.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable("git_providers")
    .addColumn("id", "uuid", (c) => c.primaryKey())
    .addColumn("user_id", "uuid", (c) => c.notNull().references("users.id").onDelete("cascade"))
    .addColumn("provider", "text", (c) => c.notNull())
    .addColumn("host", "text")
    .addColumn("token_sealed", "text", (c) => c.notNull())
    .addColumn("created_at", "timestamptz", (c) => c.notNull().defaultTo(sql`clock_timestamp()`))
    .addColumn("updated_at", "timestamptz", (c) => c.notNull().defaultTo(sql`clock_timestamp()`))
    .addUniqueConstraint("git_providers_user_provider_key", ["user_id", "provider"])
    .execute();

  await db.schema
    .createTable("pull_requests")
    .addColumn("id", "uuid", (c) => c.primaryKey())
    .addColumn("conversation_id", "uuid", (c) => c.notNull().references("conversations.id").onDelete("cascade"))
    .addColumn("provider", "text", (c) => c.notNull())
    .addColumn("repository", "text", (c) => c.notNull())
    .addColumn("number", "integer", (c) => c.notNull())
    .addColumn("url", "text", (c) => c.notNull())
    .addColumn("head", "text", (c) => c.notNull())
    .addColumn("base", "text", (c) => c.notNull())
    .addColumn("created_at", "timestamptz", (c) => c.notNull().defaultTo(sql`clock_timestamp()`))
    .addUniqueConstraint("pull_requests_conversation_number_key", ["conversation_id", "repository", "number"])
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable("pull_requests").ifExists().execute();
  await db.schema.dropTable("git_providers").ifExists().execute();
}
