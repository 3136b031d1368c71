import type { StoredSessionApiKey } from "@tern/core";
import { type Kysely, type Selectable, sql } from "kysely";
import type { AgentServerConversationsTable, Database } from "../schema.ts";

/** What the client of a sandbox's agent-server API named for a conversation's agent. */
export interface AgentServerAgent {
  conversationId: string;
  llmModel: string;
  llmBaseUrl: string | null;
  /** Sealed; opened only on the worker, for a run. */
  sealedLlmApiKey: string | null;
  /** tern's tool names the agent is offered (terminal, file_editor, task_tracker, think, finish). */
  tools: string[];
  sealedMcpConfig: string | null;
  maxIterations: number;
  stuckDetection: boolean;
  workingDir: string;
  /** The client's agent as ConversationInfo echoes it: every secret the SDK's models mark masked. */
  agent: Record<string, unknown>;
  /** The client's agent as given, sealed: the only place its other secrets are kept. */
  sealedAgent: string | null;
  createdAt: string;
}

export interface NewAgentServerConversation {
  id: string;
  userId: string;
  sandboxId: string;
  title: string | null;
  sessionApiKey: StoredSessionApiKey;
  workspaceDir: string;
  parentConversationId: string | null;
  agent: Omit<AgentServerAgent, "conversationId" | "createdAt">;
}

const toAgent = (r: Selectable<AgentServerConversationsTable>): AgentServerAgent => ({
  conversationId: r.conversation_id,
  llmModel: r.llm_model,
  llmBaseUrl: r.llm_base_url,
  sealedLlmApiKey: r.llm_api_key_sealed,
  tools: r.tools,
  sealedMcpConfig: r.mcp_config_sealed,
  maxIterations: r.max_iterations,
  stuckDetection: r.stuck_detection,
  workingDir: r.working_dir,
  agent: r.agent,
  sealedAgent: r.agent_sealed,
  createdAt: r.created_at,
});

export const agentServerConversationsRepository = (db: Kysely<Database>) => ({
  /**
   * The conversation row (no start task: the sandbox exists already) and its agent, in one
   * transaction. Returns false when the id is taken (the caller answers with what is there).
   */
  async create(input: NewAgentServerConversation): Promise<boolean> {
    return db.transaction().execute(async (trx) => {
      const inserted = await trx
        .insertInto("conversations")
        .values({
          id: input.id,
          user_id: input.userId,
          start_task_id: null,
          title: input.title,
          sandbox_id: input.sandboxId,
          session_api_key_hash: input.sessionApiKey.hash,
          session_api_key_sealed: input.sessionApiKey.sealed,
          selected_repository: null,
          selected_branch: null,
          git_provider: null,
          llm_model: input.agent.llmModel,
          skills: JSON.stringify([]),
          hooks: JSON.stringify([]),
          workspace_dir: input.workspaceDir,
          parent_conversation_id: input.parentConversationId,
        })
        .onConflict((oc) => oc.column("id").doNothing())
        .returning("id")
        .executeTakeFirst();
      if (!inserted) return false;
      const a = input.agent;
      await trx
        .insertInto("agent_server_conversations")
        .values({
          conversation_id: input.id,
          llm_model: a.llmModel,
          llm_base_url: a.llmBaseUrl,
          llm_api_key_sealed: a.sealedLlmApiKey,
          tools: JSON.stringify(a.tools),
          mcp_config_sealed: a.sealedMcpConfig,
          max_iterations: a.maxIterations,
          stuck_detection: a.stuckDetection,
          working_dir: a.workingDir,
          agent: JSON.stringify(a.agent),
          agent_sealed: a.sealedAgent,
        })
        .execute();
      return true;
    });
  },

  async get(conversationId: string): Promise<AgentServerAgent | null> {
    const row = await db
      .selectFrom("agent_server_conversations")
      .selectAll()
      .where("conversation_id", "=", conversationId)
      .executeTakeFirst();
    return row ? toAgent(row) : null;
  },

  async getMany(conversationIds: readonly string[]): Promise<Map<string, AgentServerAgent>> {
    if (conversationIds.length === 0) return new Map();
    const rows = await db
      .selectFrom("agent_server_conversations")
      .selectAll()
      .where("conversation_id", "in", conversationIds)
      .execute();
    return new Map(rows.map((r) => [r.conversation_id, toAgent(r)]));
  },

  /** The conversation's own secrets, sealed as one JSON object; null when it has none. */
  async sealedSecrets(conversationId: string): Promise<string | null> {
    const row = await db
      .selectFrom("agent_server_conversation_secrets")
      .select("secrets_sealed")
      .where("conversation_id", "=", conversationId)
      .executeTakeFirst();
    return row?.secrets_sealed ?? null;
  },

  /** Replaces the conversation's own secrets (sealed by the caller). */
  async setSecrets(conversationId: string, sealed: string): Promise<void> {
    await db
      .insertInto("agent_server_conversation_secrets")
      .values({ conversation_id: conversationId, secrets_sealed: sealed })
      .onConflict((oc) => oc.column("conversation_id").doUpdateSet({ secrets_sealed: sealed, updated_at: sql`now()` }))
      .execute();
  },
});
