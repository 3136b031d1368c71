import {
  type Conversation,
  GoneError,
  isSandboxRunnable,
  type MessageContent,
  newEvent,
  type SandboxStatus,
  sandboxReadError,
  skillsTriggeredBy,
  textOfContent,
  UnavailableError,
} from "@tern/core";
import { eventsRepository, sandboxesRepository } from "@tern/db";
import type { ConversationDeps } from "../deps.ts";
import { type Caller, ownedConversation } from "../ownership.ts";
import { assertQueueReady } from "../queue-availability.ts";
import { assertAgentRunAllowed, assertMessageSize } from "../quotas.ts";
import { maskMessageContent } from "../secrets.ts";
import { inTransaction } from "../transaction.ts";
import { rejectPendingForMessage } from "./confirmation.ts";
import { enqueueRun, requestRun } from "./runs.ts";
import { engineOf, refuseRun } from "./sandbox-of.ts";

export interface UserMessage {
  content: MessageContent[];
  /** Ask for a run of the agent, if none is going on, to answer it. */
  run: boolean;
}

/**
 * The skills a message triggers that no earlier user message of the conversation did: its
 * `activated_skills`, as OpenHands records them (the agent adds each skill to the history once).
 */
const newlyTriggeredSkills = async (
  deps: Pick<ConversationDeps, "db">,
  conversation: Conversation,
  content: MessageContent[],
): Promise<string[]> => {
  const triggered = skillsTriggeredBy(conversation.skills, textOfContent(content)).map((m) => m.skill.name);
  if (triggered.length === 0) return [];
  const before = await eventsRepository(deps.db).activatedSkillNames(conversation.id);
  return triggered.filter((name) => !before.has(name));
};

/**
 * Appends the user's message to the conversation; with `run`, asks for a run of the agent (a run
 * in progress takes the message up at its next step). The message and the run commit together,
 * so the run always sees it, and is owed from then on: its job follows the commit, and one that
 * cannot be added then is added by the janitor's sweep. While the queue is down and a run is
 * wanted nothing is stored.
 * With `limits`: a message longer than MAX_MESSAGE_BYTES is refused (PayloadTooLargeError), and so
 * is one that would take the conversation past MAX_EVENTS_PER_CONVERSATION (EventLimitError).
 */
export const sendMessage = async (
  deps: ConversationDeps,
  caller: Caller,
  conversationId: string,
  message: UserMessage,
): Promise<void> => {
  const conversation = await ownedConversation(deps, caller, conversationId);
  assertMessageSize(message.content, deps.limits);
  if (message.run && !isSandboxRunnable(conversation.sandboxStatus)) await refuseRun(deps, conversation);
  if (message.run) assertQueueReady(deps);
  const engineId = message.run ? await engineOf(deps, conversation) : null;
  // Stored masked, as every event: a secret the user pastes is kept as <secret:NAME>.
  const content = deps.secretBox
    ? await maskMessageContent({ db: deps.db, secretBox: deps.secretBox }, conversation, message.content)
    : message.content;
  const activated = await newlyTriggeredSkills(deps, conversation, content);
  // Calls waiting for confirmation are rejected before the message, as OpenHands does.
  await rejectPendingForMessage(deps, conversation);
  const run = await inTransaction(deps.db, async (trx) => {
    // An agent-server conversation's run counts against its user's work in progress: refused before anything is written.
    if (message.run) await assertAgentRunAllowed(trx, conversation, deps.limits);
    await eventsRepository(trx).append(
      conversation.id,
      [newEvent.userMessage(content, activated.length ? activated : undefined)],
      { maxEvents: deps.limits?.maxEventsPerConversation },
    );
    return message.run ? requestRun(trx, conversation.id, engineId) : null;
  });
  if (run) await enqueueRun(deps, run);
};

export interface AppSendMessageResult {
  success: boolean;
  sandbox_status: SandboxStatus;
  message: string | null;
}

/**
 * OpenHands' POST /app-conversations/{id}/send-message: the message, and (run defaults to true) a
 * run of the agent. A sandbox the user paused is 409 (resume it first); one removed is 410; one in
 * error is 503. A sandbox the janitor paused for idleness counts as running: the run resumes it.
 */
export const sendAppMessage = async (
  deps: ConversationDeps,
  caller: Caller,
  rawId: string,
  message: { content: MessageContent[]; run: boolean },
): Promise<AppSendMessageResult> => {
  const conversation = await ownedConversation(deps, caller, rawId);
  const status = conversation.sandboxStatus;
  if (status === "MISSING") {
    throw new GoneError("The conversation's sandbox was removed; start a new conversation to continue");
  }
  if (status === "ERROR") throw new UnavailableError("The conversation's sandbox is in error");
  if (status === "PAUSED") {
    const sandbox = conversation.sandboxId ? await sandboxesRepository(deps.db).get(conversation.sandboxId) : null;
    if (!sandbox?.idlePausedAt) throw sandboxReadError("paused", conversation.sandboxId ?? "");
  }
  await sendMessage(deps, caller, conversation.id, message);
  return {
    success: true,
    sandbox_status: status === "PAUSED" ? "RUNNING" : status,
    message: message.run ? "Message sent; the agent runs" : "Message stored",
  };
};
