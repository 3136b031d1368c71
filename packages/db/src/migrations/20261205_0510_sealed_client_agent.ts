import { maskSdkSecrets } from "@tern/core";
import { type Kysely, sql } from "kysely";

/**
 * The agent an agent-server client named, as it was given, sealed (`agent_sealed`, context
 * `agent-server:<conversation>:agent`): every secret the SDK's models mark in it (its LLM's AWS keys
 * and extra headers, its condensers' and critic's keys, its context's secrets, its MCP servers' auth)
 * is kept only there. `agent`, what ConversationInfo echoes, holds them masked: rows written before
 * are masked here.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`alter table agent_server_conversations add column agent_sealed text`.execute(db);
  const rows = await sql<{ conversation_id: string; agent: Record<string, unknown> }>`
    select conversation_id, agent from agent_server_conversations`.execute(db);
  for (const row of rows.rows) {
    const { masked, secrets } = maskSdkSecrets(row.agent, "AgentBase");
    if (secrets.length === 0) continue;
    await sql`update agent_server_conversations set agent = ${JSON.stringify(masked)}::jsonb
      where conversation_id = ${row.conversation_id}`.execute(db);
  }
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`alter table agent_server_conversations drop column if exists agent_sealed`.execute(db);
}
