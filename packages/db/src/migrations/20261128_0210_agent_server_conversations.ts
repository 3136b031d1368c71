import { type Kysely, sql } from "kysely";

/**
 * Conversations started on a sandbox's agent-server API: what the client named for its
 * agent, beside the conversation row. The LLM key is sealed (context
 * `agent-server:<conversation>:llm_api_key`) and so are the conversation's own secrets (one sealed
 * JSON object in a table of its own, context `agent-server:<conversation>:secrets`); the MCP config likewise, since its
 * headers and env values may be credentials. `agent` is the client's agent as ConversationInfo
 * echoes it, the key left out.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    create table agent_server_conversations (
      conversation_id uuid primary key references conversations(id) on delete cascade,
      llm_model text not null,
      llm_base_url text,
      llm_api_key_sealed text,
      tools jsonb not null,
      mcp_config_sealed text,
      max_iterations integer not null,
      stuck_detection boolean not null default true,
      working_dir text not null,
      agent jsonb not null,
      created_at timestamptz not null default now()
    )`.execute(db);
  // Any conversation of a sandbox may be given secrets there, one started by the app server too.
  await sql`
    create table agent_server_conversation_secrets (
      conversation_id uuid primary key references conversations(id) on delete cascade,
      secrets_sealed text not null,
      updated_at timestamptz not null default now()
    )`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`drop table if exists agent_server_conversation_secrets, agent_server_conversations`.execute(db);
}
