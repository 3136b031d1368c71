import { ConflictError, isSandboxRunnable } from "@tern/core";
import { agentRunsRepository } from "@tern/db";
import type { ConversationDeps } from "../deps.ts";
import { type Caller, ownedConversation } from "../ownership.ts";
import { assertQueueReady } from "../queue-availability.ts";
import { assertAgentRunAllowed } from "../quotas.ts";
import { assertNotWaitingForConfirmation } from "./confirmation.ts";
import { enqueueRun, requestRun } from "./runs.ts";
import { engineOf, refuseRun } from "./sandbox-of.ts";

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
  assertQueueReady(deps);
  const engineId = await engineOf(deps, conversation);
  // The run holding the conversation is going on while its row is open, whatever Redis holds: a
  // job Redis lost is added again by the janitor, and one given up on ends the run there.
  const runs = agentRunsRepository(deps.db);
  const active = await runs.activeRun(conversation.id);
  if (active && (await runs.isOpen(active))) {
    throw new ConflictError("The agent is already running in this conversation");
  }
  await assertAgentRunAllowed(deps.db, conversation, deps.limits);
  await enqueueRun(deps, await requestRun(deps.db, conversation.id, engineId));
};
