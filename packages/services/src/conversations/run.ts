import { ConflictError, isSandboxRunnable } from "@tern/core";
import { agentRunsRepository } from "@tern/db";
import { isAgentRunJobAlive } from "@tern/queue";
import type { ConversationDeps } from "../deps.ts";
import { type Caller, ownedConversation } from "../ownership.ts";
import { withJobQueue } from "../queue-availability.ts";
import { assertNotWaitingForConfirmation } from "./confirmation.ts";
import { engineOf, refuseRun, requestRun } from "./sandbox-of.ts";

/**
 * Asks for a run of the agent, which continues from the stored events. ConflictError while a run
 * is going on (as OpenHands answers) or once the sandbox is gone.
 */
export const runConversation = async (
  deps: ConversationDeps,
  caller: Caller,
  conversationId: string,
): Promise<void> => {
  const conversation = await ownedConversation(deps, caller, conversationId);
  if (!isSandboxRunnable(conversation.sandboxStatus)) await refuseRun(deps, conversation);
  assertNotWaitingForConfirmation(conversation);
  const engineId = await engineOf(deps, conversation);
  // The worker's run lock is what guarantees one run; a lock whose job is gone is stale, and the
  // worker ends it when the new run comes.
  const active = await agentRunsRepository(deps.db).activeRun(conversation.id);
  if (active && (await withJobQueue(deps, () => isAgentRunJobAlive(deps.queues, conversation.id, active, engineId)))) {
    throw new ConflictError("The agent is already running in this conversation");
  }
  await requestRun(deps, conversation.id, engineId);
};
