import { type Kysely, sql } from "kysely";

/**
 * Users of their own: a name per user, their secrets and LLM settings, and the secrets
 * a start request carried.
 * - `user_secrets`: one row per (user, name); `value` sealed with the deployment's secret box
 *   (context `secret:<user>:<name>`), so a row copied elsewhere does not open.
 * - `user_settings`: one row per user; `llm_api_key` sealed (context `settings:<user>:llm_api_key`).
 * - `start_task_secrets`: the start request's `secrets`, sealed (context
 *   `start-secret:<task>:<name>`); the request kept on the task only names them.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable("users").addColumn("name", "text").execute();
  await db.schema
    .createTable("user_secrets")
    .addColumn("user_id", "uuid", (c) => c.notNull().references("users.id").onDelete("cascade"))
    .addColumn("name", "text", (c) => c.notNull())
    .addColumn("description", "text")
    .addColumn("value", "text", (c) => c.notNull())
    .addColumn("created_at", "timestamptz", (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn("updated_at", "timestamptz", (c) => c.notNull().defaultTo(sql`now()`))
    .addPrimaryKeyConstraint("user_secrets_pkey", ["user_id", "name"])
    .execute();
  await db.schema
    .createTable("user_settings")
    .addColumn("user_id", "uuid", (c) => c.primaryKey().references("users.id").onDelete("cascade"))
    .addColumn("llm_model", "text")
    .addColumn("llm_base_url", "text")
    .addColumn("llm_api_key", "text")
    .addColumn("max_iterations", "integer")
    .addColumn("max_budget_per_task", "double precision")
    .addColumn("updated_at", "timestamptz", (c) => c.notNull().defaultTo(sql`now()`))
    .execute();
  await db.schema
    .createTable("start_task_secrets")
    .addColumn("start_task_id", "uuid", (c) => c.notNull().references("start_tasks.id").onDelete("cascade"))
    .addColumn("name", "text", (c) => c.notNull())
    .addColumn("value", "text", (c) => c.notNull())
    .addPrimaryKeyConstraint("start_task_secrets_pkey", ["start_task_id", "name"])
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable("start_task_secrets").ifExists().execute();
  await db.schema.dropTable("user_settings").ifExists().execute();
  await db.schema.dropTable("user_secrets").ifExists().execute();
  await db.schema.alterTable("users").dropColumn("name").execute();
}
