import {
  type ConfirmationPolicy,
  ConflictError,
  type Conversation,
  isSandboxRunnable,
  NotFoundError,
} from "@tern/core";
import { confirmationsRepository } from "@tern/db";
import type { ConversationDeps } from "../deps.ts";
import { type Caller, ownedConversation } from "../ownership.ts";
import { assertQueueReady } from "../queue-availability.ts";
import { enqueueRun } from "./runs.ts";
import { engineOf } from "./sandbox-of.ts";

/**
 * Confirmation mode: the user's answer to tool calls that wait, and a conversation's own
 * policy. What waits was stored by the run that stopped (packages/agent, loop.ts), which then
 * ended its job: nothing holds a worker or a job slot while the user decides. The answer asks for
 * a new run, which runs the accepted calls, or reads the rejections and goes on.
 */

/** OpenHands' default reason (ConfirmationResponseRequest.reason). */
export const defaultRejectionReason = "User rejected the action.";

/** The reason pending calls are rejected with when the user sends a message instead of answering. */
export const newMessageRejectionReason = "The user sent a new message instead of confirming the action.";

export interface ConfirmationResponse {
  accept: boolean;
  /** Why the user rejected; ignored on accept. */
  reason?: string | undefined;
}

const notWaiting = () =>
  new ConflictError("No tool calls wait for confirmation in this conversation (never asked, or already answered)");

/**
 * Accept: the pending calls run, once, in a new run. Reject: each gets a UserRejectObservation
 * with the reason, and a new run lets the agent go on knowing it. ConflictError when nothing
 * waits: a second answer, or one after a reject (the status left `waiting_for_confirmation` with
 * the first, under the conversation's row lock).
 */
export const respondToConfirmation = async (
  deps: ConversationDeps,
  caller: Caller,
  conversationId: string,
  response: ConfirmationResponse,
): Promise<{ actions: number }> => {
  const conversation = await ownedConversation(deps, caller, conversationId);
  // Accepted calls could not run: say so now, and leave them waiting (a reject still goes through).
  const waiting = conversation.executionStatus === "waiting_for_confirmation";
  if (response.accept && waiting && !isSandboxRunnable(conversation.sandboxStatus)) {
    throw new ConflictError("The conversation's sandbox was removed: the calls cannot run; reject them instead");
  }
  // Refused before anything is written while the queue is down: the calls keep waiting.
  assertQueueReady(deps);
  const engineId = await engineOf(deps, conversation);
  const done = await confirmationsRepository(deps.db).answer(
    conversation.id,
    response.accept ? { accept: true } : { accept: false, reason: response.reason || defaultRejectionReason },
    { run: { engineId } },
  );
  if (done.outcome === "missing") throw new NotFoundError("Conversation not found");
  if (done.outcome === "not_waiting") throw notWaiting();
  if (done.run) await enqueueRun(deps, done.run);
  return { actions: done.pending.length };
};

/**
 * A message sent while calls wait rejects them first, as OpenHands does (send_message while
 * WAITING_FOR_CONFIRMATION): the model reads the rejection, then the message. Nothing waiting:
 * nothing done.
 */
export const rejectPendingForMessage = async (
  deps: Pick<ConversationDeps, "db">,
  conversation: Conversation,
): Promise<void> => {
  if (conversation.executionStatus !== "waiting_for_confirmation") return;
  await confirmationsRepository(deps.db).answer(conversation.id, {
    accept: false,
    reason: newMessageRejectionReason,
  });
};

/** The refusal of POST /run while calls wait: a run would have to accept or reject them first. */
export const assertNotWaitingForConfirmation = (conversation: Conversation): void => {
  if (conversation.executionStatus === "waiting_for_confirmation") {
    throw new ConflictError(
      "Tool calls wait for confirmation: answer them (POST /events/respond_to_confirmation) or send a message",
    );
  }
};

/** Sets the conversation's own policy, which overrides its user's settings from the next LLM response on. */
export const setConfirmationPolicy = async (
  deps: Pick<ConversationDeps, "db">,
  caller: Caller,
  conversationId: string,
  policy: ConfirmationPolicy,
): Promise<void> => {
  const conversation = await ownedConversation(deps, caller, conversationId);
  await confirmationsRepository(deps.db).setPolicy(conversation.id, policy);
};
