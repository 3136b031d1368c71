import { buildSystemPrompt, systemPromptTools } from "@tern/agent";
import {
  type Conversation,
  type EventDraft,
  issueSessionApiKey,
  newEvent,
  type RepositoryHook,
  type Skill,
  skillsTriggeredBy,
  textOfContent,
  toHexId,
} from "@tern/core";
import { conversationsRepository, eventsRepository, sandboxesRepository, userSettingsRepository } from "@tern/db";
import { enqueueAgentRun } from "@tern/queue";
import { maskMessageContent } from "@tern/services";
import { type AcquiredSandbox, conversationIdForTask, type StartContext, type Workspace } from "./context.ts";

/** What `agent_type: plan` adds to the system prompt (OpenHands gives its plan agent planning tools). */
const PLAN_AGENT_INSTRUCTION =
  "You are in planning mode: study the workspace and answer with a plan (write it to PLAN.md). " +
  "Do not change any other file.";

/**
 * STARTING_CONVERSATION: the conversation record, its first events (system prompt, the initial
 * user message) and, when there is an initial message, the agent run: as in OpenHands, an initial
 * message always starts the agent, whatever its `run` says. A second run of this stage finds the
 * conversation and its events and adds nothing.
 */
export const startConversation = async (
  ctx: StartContext,
  sandbox: AcquiredSandbox,
  workspace: Workspace,
  skills: Skill[],
  /** What SETTING_UP_GIT_HOOKS installed. */
  hooks: RepositoryHook[] = [],
): Promise<Conversation> => {
  const { deps, task } = ctx;
  const request = task.request;
  // The id the request asked for (checked free when the task was made), else one fixed per task.
  const id = request.conversation_id ?? conversationIdForTask(task.id);
  const conversation = await conversationsRepository(deps.db).createForTask({
    id,
    userId: task.userId,
    startTaskId: task.id,
    title: request.title ?? `Conversation ${toHexId(id).slice(0, 5)}`,
    sandboxId: sandbox.sandboxId,
    sessionApiKey: issueSessionApiKey(deps.secretBox, id).stored,
    selectedRepository: workspace.repository?.fullName ?? null,
    selectedBranch: request.selected_branch ?? null,
    gitProvider: request.git_provider ?? (workspace.repository ? workspace.repository.provider : null),
    // The request's model, else the user's setting, else the deployment's (issue 12).
    llmModel:
      request.llm_model ??
      (await userSettingsRepository(deps.db).get(task.userId)).llmModel ??
      deps.config.LLM_MODEL ??
      null,
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
  if (conversation.sandboxId !== sandbox.sandboxId) {
    await conversationsRepository(deps.db).setSandbox(conversation.id, sandbox.sandboxId);
  }
  await sandboxesRepository(deps.db).update(sandbox.sandboxId, { conversationId: conversation.id });

  const drafts: EventDraft[] = [
    newEvent.systemPrompt(
      [
        buildSystemPrompt({
          workspaceDir: workspace.dir,
          repository: workspace.repository?.fullName ?? null,
          skills,
          llmModel: conversation.llmModel,
        }),
        ...(request.agent_type === "plan" ? [PLAN_AGENT_INSTRUCTION] : []),
        ...(request.system_message_suffix ? [request.system_message_suffix] : []),
      ].join("\n\n"),
      // The tools the agent offers the model, in the shape OpenHands stores them.
      systemPromptTools(),
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
  if (initial) {
    // The first run's id is the conversation's own, so every attempt of this stage asks for it: an
    // attempt that died after writing the events loses no run, and BullMQ keeps the one job.
    // To the queue of this worker's engine, where the sandbox was made (affinity).
    const runId = await enqueueAgentRun(deps.queues, conversation.id, conversation.id, deps.engineId);
    ctx.log.info({ conversation_id: conversation.id, run_id: runId }, "agent run requested");
  }
  return conversation;
};
