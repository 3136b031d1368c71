import { type Kysely, sql } from "kysely";

/**
 * A user's MCP servers: the config sealed whole (header and env values may be
 * credentials; context `settings:<user>:mcp_config`), and beside it the same config with those
 * values hidden, which is what GET /settings shows without opening anything.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`alter table user_settings add column mcp_config_sealed text, add column mcp_config_masked jsonb`.execute(
    db,
  );
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`alter table user_settings drop column if exists mcp_config_sealed, drop column if exists mcp_config_masked`.execute(
    db,
  );
}
