import { agentRunsRepository } from "@tern/db";
import type { RunStopKind } from "@tern/queue";
import type { ServiceDeps } from "../deps.ts";
import { type Caller, ownedConversation } from "../ownership.ts";

/** Word to the workers that the user stopped a conversation's run (Redis pub/sub: it may be lost). */
export type PublishRunStop = (conversationId: string, kind: RunStopKind) => Promise<void>;

/**
 * Pauses the agent: a PauseEvent. A run in progress stops between two steps; with none in
 * progress the conversation is `paused` at once. A run still starting the user's MCP servers
 * (which may take up to MCP_STARTUP_TIMEOUT_MS) is told (`publish`) and stops starting them now;
 * should the word be lost, it pauses once they are up.
 */
export const pauseConversation = async (
  deps: Pick<ServiceDeps, "db" | "limits"> & { publish?: PublishRunStop },
  caller: Caller,
  conversationId: string,
): Promise<void> => {
  const conversation = await ownedConversation(deps, caller, conversationId);
  const asked = await agentRunsRepository(deps.db).requestPause(conversation.id, {
    maxEvents: deps.limits?.maxEventsPerConversation,
  });
  if (asked?.activeRunId && deps.publish) await deps.publish(conversation.id, "pause").catch(() => undefined);
};

/**
 * Stops the agent now (POST /interrupt): an InterruptEvent and a PauseEvent, then word to the
 * workers (`publish`), whose run holding the conversation cancels its LLM call, sends Ctrl-C to
 * its running command and ends `paused`. Should the word be lost, the PauseEvent still stops the
 * run at its next step.
 */
export const interruptConversation = async (
  deps: Pick<ServiceDeps, "db" | "limits" | "logger"> & { publish: PublishRunStop },
  caller: Caller,
  conversationId: string,
): Promise<void> => {
  const conversation = await ownedConversation(deps, caller, conversationId);
  const asked = await agentRunsRepository(deps.db).requestPause(conversation.id, {
    maxEvents: deps.limits?.maxEventsPerConversation,
    interrupt: true,
  });
  if (!asked?.activeRunId) return;
  await deps.publish(conversation.id, "interrupt").catch((err: unknown) => {
    deps.logger.warn(
      { err, conversation_id: conversation.id },
      "interrupt not published; the run stops at its next step",
    );
  });
};
