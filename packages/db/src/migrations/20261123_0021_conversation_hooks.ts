import { type Kysely, sql } from "kysely";

/**
 * What SETTING_UP_GIT_HOOKS installed, kept on the conversation (as its skills are) for
 * GET /app-conversations/{id}/hooks, in OpenHands' hook shape.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .alterTable("conversations")
    .addColumn("hooks", "jsonb", (c) => c.notNull().defaultTo(sql`'[]'::jsonb`))
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable("conversations").dropColumn("hooks").execute();
}
