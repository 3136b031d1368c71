import { agentRunsRepository } from "@tern/db";
import type { RunStopKind } from "@tern/queue";
import type { ServiceDeps } from "../deps.ts";
import { type Caller, ownedConversation } from "../ownership.ts";

/** Word to the workers that the user stopped a conversation's run (Redis pub/sub: it may be lost). */
export type PublishRunStop = (conversationId: string, kind: RunStopKind) => Promise<void>;

/**
 * The user's stop of a run: the PauseEvent (after an InterruptEvent for an interrupt) stored, then
 * word to the workers when a run holds the conversation. Should the word be lost, the PauseEvent
 * still stops the run at its next step.
 */
const stopRun = async (
  deps: Pick<ServiceDeps, "db" | "limits"> & { publish?: PublishRunStop; logger?: ServiceDeps["logger"] },
  caller: Caller,
  conversationId: string,
  kind: RunStopKind,
): Promise<void> => {
  const conversation = await ownedConversation(deps, caller, conversationId);
  const asked = await agentRunsRepository(deps.db).requestPause(conversation.id, {
    maxEvents: deps.limits?.maxEventsPerConversation,
    interrupt: kind === "interrupt",
  });
  if (!asked?.activeRunId || !deps.publish) return;
  await deps.publish(conversation.id, kind).catch((err: unknown) => {
    deps.logger?.warn(
      { err, conversation_id: conversation.id, kind },
      "stop not published; the run stops at its next step",
    );
  });
};

/**
 * Pauses the agent: a PauseEvent. A run in progress stops between two steps; with none in
 * progress the conversation is `paused` at once. A run still starting the user's MCP servers
 * (which may take up to MCP_STARTUP_TIMEOUT_MS) is told (`publish`) and stops starting them now.
 */
export const pauseConversation = (
  deps: Pick<ServiceDeps, "db" | "limits"> & { publish?: PublishRunStop; logger?: ServiceDeps["logger"] },
  caller: Caller,
  conversationId: string,
): Promise<void> => stopRun(deps, caller, conversationId, "pause");

/**
 * Stops the agent now (POST /interrupt): an InterruptEvent and a PauseEvent, then word to the
 * workers (`publish`), whose run holding the conversation cancels its LLM call, sends Ctrl-C to
 * its running command and ends `paused`.
 */
export const interruptConversation = (
  deps: Pick<ServiceDeps, "db" | "limits" | "logger"> & { publish: PublishRunStop },
  caller: Caller,
  conversationId: string,
): Promise<void> => stopRun(deps, caller, conversationId, "interrupt");
