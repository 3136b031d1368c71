import { type Kysely, sql } from "kysely";

/**
 * The sandbox images this deployment has offered (SANDBOX_IMAGE and SANDBOX_IMAGES), with the
 * time each was first offered: a spec's `created_at` stays the same across restarts and replicas.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable("sandbox_specs")
    .addColumn("id", "text", (c) => c.primaryKey())
    .addColumn("created_at", "timestamptz", (c) => c.notNull().defaultTo(sql`now()`))
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable("sandbox_specs").ifExists().execute();
}
