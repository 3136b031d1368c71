import {
  type Conversation,
  type EventDraft,
  type GitProvider,
  issueSessionApiKey,
  newEvent,
  type RepositoryHook,
  type SecretBox,
  type Skill,
  type StartTask,
  type SystemPromptTool,
  skillsTriggeredBy,
  textOfContent,
  toHexId,
} from "@tern/core";
import {
  conversationsRepository,
  type Database,
  eventsRepository,
  sandboxesRepository,
  userSettingsRepository,
} from "@tern/db";
import type { Kysely } from "kysely";
import { maskMessageContent } from "../secrets.ts";

/** What `agent_type: plan` adds to the system prompt (OpenHands gives its plan agent planning tools). */
export const PLAN_AGENT_INSTRUCTION =
  "You are in planning mode: study the workspace and answer with a plan (write it to PLAN.md). " +
  "Do not change any other file.";

export interface OpenConversationDeps {
  db: Kysely<Database>;
  secretBox: SecretBox;
  /** The deployment's model (LLM_MODEL), when neither the request nor the user's settings name one. */
  defaultLlmModel: string | null;
}

export interface OpenedStart {
  task: StartTask;
  /** The conversation's id: the one the request asked for, else one fixed per task. */
  conversationId: string;
  sandboxId: string;
  workspace: { dir: string; repository: { fullName: string; provider: GitProvider } | null };
  skills: Skill[];
  /** What SETTING_UP_GIT_HOOKS installed. */
  hooks: RepositoryHook[];
  /** The agent's system prompt and tools for the conversation's model (the agent package builds them). */
  systemPrompt: (llmModel: string | null) => { text: string; tools: SystemPromptTool[] };
}

/**
 * Opens the conversation a start made: its record and its first events (system prompt, the
 * initial user message). Idempotent: a second call for the same task finds the conversation and
 * its events and adds nothing. The first run is the caller's to ask for (requestRun, with the
 * conversation's own id), in the transaction that makes the task READY.
 */
export const openConversation = async (deps: OpenConversationDeps, start: OpenedStart): Promise<Conversation> => {
  const { task, workspace, skills, hooks, sandboxId } = start;
  const request = task.request;
  const id = start.conversationId;
  const conversation = await conversationsRepository(deps.db).createForTask({
    id,
    userId: task.userId,
    startTaskId: task.id,
    title: request.title ?? `Conversation ${toHexId(id).slice(0, 5)}`,
    sandboxId,
    sessionApiKey: issueSessionApiKey(deps.secretBox, id).stored,
    selectedRepository: workspace.repository?.fullName ?? null,
    selectedBranch: request.selected_branch ?? null,
    gitProvider: request.git_provider ?? (workspace.repository ? workspace.repository.provider : null),
    // The request's model, else the user's setting, else the deployment's.
    llmModel:
      request.llm_model ?? (await userSettingsRepository(deps.db).get(task.userId)).llmModel ?? deps.defaultLlmModel,
    skills,
    hooks,
    workspaceDir: workspace.dir,
    trigger: request.trigger ?? null,
    prNumber: request.pr_number ?? [],
    parentConversationId: request.parent_conversation_id ?? null,
    public: request.public ?? null,
    agentType: request.agent_type ?? "default",
  });
  // A start that began over in a fresh sandbox finds the conversation an earlier attempt made with the old one.
  if (conversation.sandboxId !== sandboxId) {
    await conversationsRepository(deps.db).setSandbox(conversation.id, sandboxId);
  }
  await sandboxesRepository(deps.db).update(sandboxId, { conversationId: conversation.id });

  const prompt = start.systemPrompt(conversation.llmModel);
  const drafts: EventDraft[] = [
    newEvent.systemPrompt(
      [
        prompt.text,
        ...(request.agent_type === "plan" ? [PLAN_AGENT_INSTRUCTION] : []),
        ...(request.system_message_suffix ? [request.system_message_suffix] : []),
      ].join("\n\n"),
      prompt.tools,
    ),
  ];
  const initial = request.initial_message;
  if (initial) {
    const text = textOfContent(initial.content);
    drafts.push(
      newEvent.userMessage(
        // Stored masked, as every event: a secret pasted into the message is kept as <secret:NAME>.
        await maskMessageContent({ db: deps.db, secretBox: deps.secretBox }, conversation, initial.content),
        skillsTriggeredBy(skills, text).map((m) => m.skill.name),
      ),
    );
  }
  await eventsRepository(deps.db).append(conversation.id, drafts, { onlyIfEmpty: true });
  return conversation;
};
