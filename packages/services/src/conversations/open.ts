import {
  type Conversation,
  type GitProvider,
  issueSessionApiKey,
  newEvent,
  newId,
  type RepositoryHook,
  type SecretBox,
  type Skill,
  type StartRequest,
  type StartTask,
  type SystemPromptTool,
  skillsTriggeredBy,
  textOfContent,
  toHexId,
} from "@tern/core";
import {
  conversationsRepository,
  type Database,
  type OpeningConversation,
  startTaskSecretsRepository,
  userSecretsRepository,
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
  /**
   * The agent's system prompt and tools for the conversation's model (the agent package builds
   * them), told the names of the secrets the agent's commands get and when the conversation opens.
   */
  systemPrompt: (llmModel: string | null, context?: SystemPromptContext) => { text: string; tools: SystemPromptTool[] };
}

export interface SystemPromptContext {
  /** The user's secrets and the start request's, by name, with the user's descriptions; never values. */
  secrets: { name: string; description: string | null }[];
  now: Date;
}

/** The names of the secrets a conversation's agent gets (as agentSecretEnv merges them), never their values. */
const secretNamesOf = async (db: Kysely<Database>, task: Pick<StartTask, "id" | "userId">) => {
  const own = await userSecretsRepository(db).list(task.userId);
  const fromStart = Object.keys(await startTaskSecretsRepository(db).get(task.id));
  const byName = new Map(own.map((s) => [s.name, { name: s.name, description: s.description }]));
  for (const name of fromStart) if (!byName.has(name)) byName.set(name, { name, description: null });
  return [...byName.values()].sort((a, b) => a.name.localeCompare(b.name));
};

/** The paragraphs a request appends to the system prompt: plan mode, then its system_message_suffix. */
export const promptSuffixesOf = (request: StartRequest): string[] => [
  ...(request.agent_type === "plan" ? [PLAN_AGENT_INSTRUCTION] : []),
  ...(request.system_message_suffix ? [request.system_message_suffix] : []),
];

/**
 * The conversation a start opens, as the request and the task make it, for both ways of opening
 * it (the pipeline's and the warm claim's): what its sandbox gives it comes apart.
 */
export const openingOf = (
  secretBox: SecretBox,
  task: Pick<StartTask, "id" | "userId" | "request">,
  conversationId: string,
): OpeningConversation => {
  const request = task.request;
  return {
    id: conversationId,
    userId: task.userId,
    startTaskId: task.id,
    title: request.title ?? `Conversation ${toHexId(conversationId).slice(0, 5)}`,
    sessionApiKey: issueSessionApiKey(secretBox, conversationId).stored,
    selectedBranch: request.selected_branch ?? null,
    gitProvider: request.git_provider ?? null,
    trigger: request.trigger ?? null,
    prNumber: request.pr_number ?? [],
    parentConversationId: request.parent_conversation_id ?? null,
    public: request.public ?? null,
    agentType: request.agent_type ?? "default",
  };
};

/**
 * Opens the conversation a start made, through the one definition the warm claim uses too
 * (tern_open_conversation): its record, its sandbox's link to it, its first events (the system
 * prompt, the initial user message) and their webhook deliveries. Idempotent: a second call for
 * the same task finds the conversation (moved to this sandbox) and its events, and adds nothing.
 * The first run is the caller's to ask for (requestRun, with the conversation's own id), in the
 * transaction that makes the task READY.
 */
export const openConversation = async (deps: OpenConversationDeps, start: OpenedStart): Promise<Conversation> => {
  const { task, workspace, skills, hooks, sandboxId } = start;
  const request = task.request;
  const opening = openingOf(deps.secretBox, task, start.conversationId);
  // The request's model, else the user's setting, else the deployment's.
  const llmModel =
    request.llm_model ?? (await userSettingsRepository(deps.db).get(task.userId)).llmModel ?? deps.defaultLlmModel;
  const initial = request.initial_message;
  const userMessage = initial
    ? newEvent.userMessage(
        // Stored masked, as every event: a secret pasted into the message is kept as <secret:NAME>.
        await maskMessageContent(
          { db: deps.db, secretBox: deps.secretBox },
          { userId: task.userId, startTaskId: task.id },
          initial.content,
        ),
        skillsTriggeredBy(skills, textOfContent(initial.content)).map((m) => m.skill.name),
      )
    : null;
  return conversationsRepository(deps.db).createForTask(
    {
      ...opening,
      sandboxId,
      selectedRepository: workspace.repository?.fullName ?? null,
      gitProvider: opening.gitProvider ?? workspace.repository?.provider ?? null,
      llmModel,
      skills,
      hooks,
      workspaceDir: workspace.dir,
    },
    {
      systemPrompt: start.systemPrompt(llmModel, { secrets: await secretNamesOf(deps.db, task), now: new Date() }),
      promptSuffixes: promptSuffixesOf(request),
      systemEventId: newId(),
      userMessage: userMessage ? { id: newId(), payload: userMessage.payload } : null,
    },
  );
};
