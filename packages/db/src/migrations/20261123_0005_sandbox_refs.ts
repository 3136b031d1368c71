import { type Kysely, sql } from "kysely";

/**
 * Sandboxes are named and referenced in the driver's terms, not Docker's: `container_name`
 * becomes `name` (fixed per owner, unique: a second create adopts the first) and `container_id`
 * becomes `ref` (what the driver gave back; opaque to everyone else). The unique constraint is
 * renamed with its column so its name still says what it guards.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable("sandboxes").renameColumn("container_name", "name").execute();
  await db.schema.alterTable("sandboxes").renameColumn("container_id", "ref").execute();
  await sql`alter table sandboxes rename constraint sandboxes_container_name_key to sandboxes_name_key`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`alter table sandboxes rename constraint sandboxes_name_key to sandboxes_container_name_key`.execute(db);
  await db.schema.alterTable("sandboxes").renameColumn("ref", "container_id").execute();
  await db.schema.alterTable("sandboxes").renameColumn("name", "container_name").execute();
}
