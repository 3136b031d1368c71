import { agentRunsRepository } from "@tern/db";
import type { ServiceDeps } from "../deps.ts";
import { type Caller, ownedConversation } from "../ownership.ts";

/**
 * Pauses the agent: a PauseEvent. A run in progress stops between two steps; with none in
 * progress the conversation is `paused` at once.
 */
export const pauseConversation = async (
  deps: Pick<ServiceDeps, "db" | "limits">,
  caller: Caller,
  conversationId: string,
): Promise<void> => {
  const conversation = await ownedConversation(deps, caller, conversationId);
  await agentRunsRepository(deps.db).requestPause(conversation.id, {
    maxEvents: deps.limits?.maxEventsPerConversation,
  });
};

/**
 * Stops the agent now (POST /interrupt): an InterruptEvent and a PauseEvent, then word to the
 * workers (`publish`), whose run holding the conversation cancels its LLM call, sends Ctrl-C to
 * its running command and ends `paused`. Should the word be lost, the PauseEvent still stops the
 * run at its next step.
 */
export const interruptConversation = async (
  deps: Pick<ServiceDeps, "db" | "limits" | "logger"> & { publish: (conversationId: string) => Promise<void> },
  caller: Caller,
  conversationId: string,
): Promise<void> => {
  const conversation = await ownedConversation(deps, caller, conversationId);
  const asked = await agentRunsRepository(deps.db).requestPause(conversation.id, {
    maxEvents: deps.limits?.maxEventsPerConversation,
    interrupt: true,
  });
  if (!asked?.activeRunId) return;
  await deps.publish(conversation.id).catch((err: unknown) => {
    deps.logger.warn(
      { err, conversation_id: conversation.id },
      "interrupt not published; the run stops at its next step",
    );
  });
};
