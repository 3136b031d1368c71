import { type Kysely, sql } from "kysely";

/**
 * Secrets the processes of one deployment share and nobody configures: the token the API shows
 * the workers' internal HTTP endpoints. The first process to need one generates it; every other
 * process (API replicas, workers on other hosts) reads the same row.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable("deployment_secrets")
    .addColumn("name", "text", (c) => c.primaryKey())
    .addColumn("value", "text", (c) => c.notNull())
    .addColumn("created_at", "timestamptz", (c) => c.notNull().defaultTo(sql`now()`))
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable("deployment_secrets").ifExists().execute();
}
