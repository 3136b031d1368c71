import { type Kysely, sql } from "kysely";

/**
 * Specs an admin names (POST /api/v1/sandbox-specs): `added_by` is the admin, null for an image of
 * the configuration. And the runtime image each engine made of a spec's base image, with its state
 * and its build's log: GET /api/v1/sandbox-specs lists them, the janitor removes those of specs gone.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable("sandbox_specs").addColumn("added_by", "uuid").execute();
  await db.schema
    .createTable("sandbox_spec_images")
    .addColumn("spec_id", "text", (c) => c.notNull())
    .addColumn("engine_id", "text", (c) => c.notNull())
    .addColumn("state", "text", (c) => c.notNull().check(sql`state in ('building', 'ready', 'failed')`))
    .addColumn("image", "text")
    .addColumn("base_id", "text")
    .addColumn("tools_version", "text")
    .addColumn("log", "text", (c) => c.notNull().defaultTo(""))
    .addColumn("error", "text")
    .addColumn("updated_at", "timestamptz", (c) => c.notNull().defaultTo(sql`now()`))
    .addPrimaryKeyConstraint("sandbox_spec_images_pk", ["spec_id", "engine_id"])
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable("sandbox_spec_images").ifExists().execute();
  await db.schema.alterTable("sandbox_specs").dropColumn("added_by").execute();
}
