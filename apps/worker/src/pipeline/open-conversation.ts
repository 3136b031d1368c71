import { buildSystemPrompt, systemPromptTools } from "@tern/agent";
import type { Conversation, RepositoryHook, Skill } from "@tern/core";
import { openConversation } from "@tern/services";
import { type AcquiredSandbox, conversationIdForTask, type StartContext, type Workspace } from "./context.ts";

/**
 * STARTING_CONVERSATION: opens the conversation the start made (@tern/services' openConversation:
 * its record, its first events), with the agent's system prompt for its model. Its first run is
 * asked for with READY.
 */
export const openStartedConversation = (
  ctx: StartContext,
  sandbox: AcquiredSandbox,
  workspace: Workspace,
  skills: Skill[],
  /** What SETTING_UP_GIT_HOOKS installed. */
  hooks: RepositoryHook[] = [],
): Promise<Conversation> => {
  const { deps, task } = ctx;
  return openConversation(
    { db: deps.db, secretBox: deps.secretBox, defaultLlmModel: deps.config.LLM_MODEL ?? null },
    {
      task,
      // The id the request asked for (checked free when the task was made), else one fixed per task.
      conversationId: task.request.conversation_id ?? conversationIdForTask(task.id),
      sandboxId: sandbox.sandboxId,
      workspace,
      skills,
      hooks,
      systemPrompt: (llmModel, context) => ({
        text: buildSystemPrompt({
          workspaceDir: workspace.dir,
          repository: workspace.repository?.fullName ?? null,
          skills,
          llmModel,
          ...context,
        }),
        // The tools the agent offers the model, in the shape OpenHands stores them.
        tools: systemPromptTools(),
      }),
    },
  );
};
