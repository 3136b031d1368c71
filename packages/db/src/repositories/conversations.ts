import type { Conversation, ConversationMetrics, ExecutionStatus, GitProvider, SandboxStatus, Skill } from "@tern/core";
import { type Kysely, type Selectable, sql } from "kysely";
import type { ConversationsTable, Database } from "../schema.ts";

type Row = Selectable<ConversationsTable> & { sandbox_status: string | null };

const emptyMetrics: ConversationMetrics = { prompt_tokens: 0, completion_tokens: 0, total_tokens: 0, llm_calls: 0 };

const toConversation = (r: Row): Conversation => ({
  id: r.id,
  userId: r.user_id,
  startTaskId: r.start_task_id,
  title: r.title,
  sandboxId: r.sandbox_id,
  sandboxStatus: (r.sandbox_status ?? "MISSING") as SandboxStatus,
  executionStatus: r.execution_status as ExecutionStatus,
  sessionApiKey: r.session_api_key,
  selectedRepository: r.selected_repository,
  selectedBranch: r.selected_branch,
  gitProvider: r.git_provider as GitProvider | null,
  llmModel: r.llm_model,
  metrics: { ...emptyMetrics, ...r.metrics },
  skills: r.skills as Skill[],
  workspaceDir: r.workspace_dir,
  createdAt: r.created_at,
  updatedAt: r.updated_at,
});

export interface NewConversation {
  id: string;
  userId: string;
  startTaskId: string;
  title: string | null;
  sandboxId: string | null;
  sessionApiKey: string;
  selectedRepository: string | null;
  selectedBranch: string | null;
  gitProvider: GitProvider | null;
  llmModel: string | null;
  skills: Skill[];
  workspaceDir: string;
}

export const conversationsRepository = (db: Kysely<Database>) => {
  // sandbox_status is read from the sandbox row (DESIGN: the conversation's status follows it).
  const base = () =>
    db
      .selectFrom("conversations")
      .leftJoin("sandboxes", "sandboxes.id", "conversations.sandbox_id")
      .selectAll("conversations")
      .select("sandboxes.status as sandbox_status");

  return {
    /** Idempotent per start task: a second call returns the conversation the first one made. */
    async createForTask(input: NewConversation): Promise<Conversation> {
      await db
        .insertInto("conversations")
        .values({
          id: input.id,
          user_id: input.userId,
          start_task_id: input.startTaskId,
          title: input.title,
          sandbox_id: input.sandboxId,
          session_api_key: input.sessionApiKey,
          selected_repository: input.selectedRepository,
          selected_branch: input.selectedBranch,
          git_provider: input.gitProvider,
          llm_model: input.llmModel,
          skills: JSON.stringify(input.skills),
          workspace_dir: input.workspaceDir,
        })
        .onConflict((oc) => oc.column("start_task_id").doNothing())
        .execute();
      const row = await base().where("conversations.start_task_id", "=", input.startTaskId).executeTakeFirstOrThrow();
      return toConversation(row);
    },

    async get(id: string): Promise<Conversation | null> {
      const row = await base().where("conversations.id", "=", id).executeTakeFirst();
      return row ? toConversation(row) : null;
    },

    async findByTask(startTaskId: string): Promise<Conversation | null> {
      const row = await base().where("conversations.start_task_id", "=", startTaskId).executeTakeFirst();
      return row ? toConversation(row) : null;
    },

    async findForUser(userId: string, ids: string[]): Promise<Conversation[]> {
      if (ids.length === 0) return [];
      const rows = await base()
        .where("conversations.user_id", "=", userId)
        .where("conversations.id", "in", ids)
        .execute();
      return rows.map(toConversation);
    },

    /**
     * The caller's conversations, newest first, keyset-paged after (created_at, id) of the last one
     * seen (conversations_user_created_idx). Returns up to `limit` + 1 rows so the caller knows if more follow.
     */
    async searchForUser(
      userId: string,
      opts: { limit: number; after?: { createdAt: string; id: string } | null },
    ): Promise<Conversation[]> {
      let q = base().where("conversations.user_id", "=", userId);
      if (opts.after) {
        q = q.where(
          sql<boolean>`(conversations.created_at, conversations.id) < (${opts.after.createdAt}::timestamptz, ${opts.after.id}::uuid)`,
        );
      }
      const rows = await q
        .orderBy("conversations.created_at", "desc")
        .orderBy("conversations.id", "desc")
        .limit(opts.limit + 1)
        .execute();
      return rows.map(toConversation);
    },

    async findBySessionKey(sessionApiKey: string): Promise<Conversation | null> {
      const row = await base().where("conversations.session_api_key", "=", sessionApiKey).executeTakeFirst();
      return row ? toConversation(row) : null;
    },

    async setExecutionStatus(id: string, status: ExecutionStatus): Promise<void> {
      await db
        .updateTable("conversations")
        .set({ execution_status: status, updated_at: sql<string>`clock_timestamp()` })
        .where("id", "=", id)
        .execute();
    },

    async setSandbox(id: string, sandboxId: string | null): Promise<void> {
      await db
        .updateTable("conversations")
        .set({ sandbox_id: sandboxId, updated_at: sql<string>`clock_timestamp()` })
        .where("id", "=", id)
        .execute();
    },

    /** Adds to the usage counters atomically (several runs never lose each other's counts). */
    async addMetrics(id: string, delta: Partial<ConversationMetrics>): Promise<void> {
      const entries = Object.entries(delta).filter(([, v]) => typeof v === "number" && v !== 0);
      if (entries.length === 0) return;
      let expr = sql<string>`metrics`;
      for (const [k, v] of entries) {
        expr = sql<string>`jsonb_set(${expr}, ${`{${k}}`}::text[], to_jsonb(coalesce((metrics->>${k})::numeric, 0) + ${v}))`;
      }
      await db
        .updateTable("conversations")
        .set({ metrics: expr, updated_at: sql<string>`clock_timestamp()` })
        .where("id", "=", id)
        .execute();
    },
  };
};

export type ConversationsRepository = ReturnType<typeof conversationsRepository>;
