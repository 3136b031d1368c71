import { metrics } from "@tern/core";
import { type Kysely, sql } from "kysely";
import type { Database } from "../schema.ts";
import type { NewConversation } from "./conversations.ts";

/**
 * The first events of a conversation a start opens: the system prompt (its text and tools, with
 * paragraphs appended: plan mode, system_message_suffix) and, when the start has one, the initial
 * message as its MessageEvent payload (masked by the caller). Written only into a conversation
 * that has none.
 */
export interface FirstEvents {
  systemPrompt: { text: string; tools: unknown[] };
  promptSuffixes: string[];
  systemEventId: string;
  userMessage: { id: string; payload: unknown } | null;
}

/** A conversation as it opens, but for what the sandbox gives it (a warm claim's row gives those). */
export type OpeningConversation = Omit<
  NewConversation,
  "sandboxId" | "workspaceDir" | "llmModel" | "skills" | "hooks" | "selectedRepository"
>;

/**
 * What `tern_open_conversation` (sql/tern_open_conversation.sql) is given, as both its callers
 * give it: openConversationRows here, and `tern_warm_claim`, which adds the warm row's sandbox,
 * workspace, model and system prompt to the same keys.
 */
export const openingParams = (conversation: OpeningConversation, first: Omit<FirstEvents, "systemPrompt"> | null) => ({
  conversation_id: conversation.id,
  task_id: conversation.startTaskId,
  user_id: conversation.userId,
  title: conversation.title,
  session_key_hash: conversation.sessionApiKey.hash,
  session_key_sealed: conversation.sessionApiKey.sealed,
  selected_branch: conversation.selectedBranch,
  git_provider: conversation.gitProvider,
  trigger: conversation.trigger ?? null,
  pr_number: conversation.prNumber ?? [],
  parent_conversation_id: conversation.parentConversationId ?? null,
  public: conversation.public ?? null,
  agent_type: conversation.agentType ?? "default",
  ...(first
    ? {
        prompt_suffixes: first.promptSuffixes,
        system_event_id: first.systemEventId,
        user_event_id: first.userMessage?.id ?? null,
        user_message: first.userMessage?.payload ?? null,
      }
    : {}),
});

/**
 * Opens a start task's conversation through `tern_open_conversation`, in the caller's transaction:
 * its row (an earlier attempt's, when there is one, moved to `sandboxId`), the sandbox's link to
 * it, and with `first` its first events and their webhook deliveries. Returns the conversation's
 * id and how many events were written (none into a conversation that had some).
 */
export const openConversationRows = async (
  db: Kysely<Database>,
  input: NewConversation,
  first: FirstEvents | null = null,
): Promise<{ conversationId: string; appended: number }> => {
  const p = {
    ...openingParams(input, first),
    sandbox_id: input.sandboxId,
    selected_repository: input.selectedRepository,
    llm_model: input.llmModel,
    skills: input.skills,
    hooks: input.hooks ?? [],
    workspace_dir: input.workspaceDir,
    ...(first ? { system_prompt: first.systemPrompt } : {}),
  };
  const r = await sql<{
    opened: { conversation_id: string; appended: number };
  }>`select tern_open_conversation(${JSON.stringify(p)}::jsonb) as opened`.execute(db);
  const opened = r.rows[0]?.opened;
  if (!opened) throw new Error("tern_open_conversation returned nothing");
  if (opened.appended > 0) metrics.eventsAppended.inc(opened.appended);
  return { conversationId: opened.conversation_id, appended: opened.appended };
};
