import { buildSystemPrompt, systemPromptTools } from "@tern/agent";
import { type Conversation, generateSessionApiKey, type Skill } from "@tern/core";
import { conversationsRepository, type EventDraft, eventsRepository, sandboxesRepository } from "@tern/db";
import { enqueueAgentRun } from "@tern/queue";
import { type AcquiredSandbox, conversationIdForTask, type StartContext, type Workspace } from "./context.ts";
import { skillsTriggeredBy } from "./skills.ts";

/**
 * STARTING_CONVERSATION: the conversation record, its first events (system prompt, the initial
 * user message) and, when asked, the agent run. A second run of this stage finds the conversation
 * and its events and adds nothing.
 */
export const startConversation = async (
  ctx: StartContext,
  sandbox: AcquiredSandbox,
  workspace: Workspace,
  skills: Skill[],
): Promise<Conversation> => {
  const { deps, task } = ctx;
  const request = task.request;
  const conversation = await conversationsRepository(deps.db).createForTask({
    id: conversationIdForTask(task.id),
    userId: task.userId,
    startTaskId: task.id,
    title: request.title ?? null,
    sandboxId: sandbox.sandboxId,
    sessionApiKey: generateSessionApiKey(),
    selectedRepository: workspace.repository?.fullName ?? null,
    selectedBranch: request.selected_branch ?? null,
    gitProvider: request.git_provider ?? (workspace.repository ? workspace.repository.provider : null),
    llmModel: request.llm_model ?? deps.config.LLM_MODEL ?? null,
    skills,
    workspaceDir: workspace.dir,
  });
  await sandboxesRepository(deps.db).update(sandbox.sandboxId, { conversationId: conversation.id });

  const drafts: EventDraft[] = [
    {
      kind: "SystemPromptEvent",
      source: "agent",
      payload: {
        system_prompt: {
          type: "text",
          text: buildSystemPrompt({
            workspaceDir: workspace.dir,
            repository: workspace.repository?.fullName ?? null,
            skills,
          }),
        },
        // The tools the agent offers the model, in the shape OpenHands stores them.
        tools: systemPromptTools(),
      },
    },
  ];
  const initial = request.initial_message;
  if (initial) {
    const text = initial.content.map((c) => c.text).join("\n");
    drafts.push({
      kind: "MessageEvent",
      source: "user",
      payload: {
        llm_message: { role: "user", content: initial.content },
        activated_skills: skillsTriggeredBy(skills, text).map((s) => s.name),
      },
    });
  }
  await eventsRepository(deps.db).append(conversation.id, drafts, { onlyIfEmpty: true });
  if (initial?.run) {
    // The first run's id is the conversation's own, so every attempt of this stage asks for it: an
    // attempt that died after writing the events loses no run, and BullMQ keeps the one job.
    const runId = await enqueueAgentRun(deps.queues, conversation.id, conversation.id);
    ctx.log.info({ conversation_id: conversation.id, run_id: runId }, "agent run requested");
  }
  return conversation;
};
