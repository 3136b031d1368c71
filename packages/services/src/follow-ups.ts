import {
  ConflictError,
  type Conversation,
  isSandboxRunnable,
  type MessageContent,
  newEvent,
  type Sandbox,
  sandboxRunError,
  skillsTriggeredBy,
  textOfContent,
  UnavailableError,
} from "@tern/core";
import { agentRunsRepository, conversationsRepository, eventsRepository, sandboxesRepository } from "@tern/db";
import { enqueue, enqueueAgentRun, isAgentRunJobAlive } from "@tern/queue";
import type { ConversationDeps, ServiceDeps } from "./deps.ts";
import { type Caller, ownedConversation } from "./ownership.ts";
import { assertQueueReady, withJobQueue } from "./queue-availability.ts";
import { assertMessageSize } from "./quotas.ts";
import { maskMessageContent } from "./secrets.ts";

/** The conversation's sandbox row, when it has one. */
const sandboxOf = async (deps: Pick<ConversationDeps, "db">, c: Conversation): Promise<Sandbox | null> =>
  c.sandboxId ? sandboxesRepository(deps.db).get(c.sandboxId) : null;

/** A run in a conversation whose sandbox is gone is refused, saying why (sandbox-state.ts). */
const refuseRun = async (deps: Pick<ConversationDeps, "db">, c: Conversation): Promise<never> => {
  throw sandboxRunError(await sandboxOf(deps, c));
};

/**
 * The engine of the conversation's sandbox, whose queue its runs go to (null: no affinity). A
 * run waits there while no worker of that engine is alive, and goes on when one is back.
 */
const engineOf = async (deps: Pick<ConversationDeps, "db">, c: Conversation): Promise<string | null> =>
  (await sandboxOf(deps, c))?.engineId ?? null;

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
 * in progress takes the message up at its next step). The message is committed before the run is
 * asked for, so the run always sees it. While the queue is down and a run is wanted nothing is
 * stored; when the run cannot be asked for after the message was stored, the error says so.
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
  await eventsRepository(deps.db).append(
    conversation.id,
    [newEvent.userMessage(content, activated.length ? activated : undefined)],
    { maxEvents: deps.limits?.maxEventsPerConversation },
  );
  if (!message.run) return;
  await withJobQueue(deps, () => enqueueAgentRun(deps.queues, conversation.id, undefined, engineId), {
    conversation_id: conversation.id,
  }).catch(() => {
    throw new UnavailableError(
      "The message was stored, but the run could not be requested (job queue unreachable); POST /run to start it",
    );
  });
};

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
  const engineId = await engineOf(deps, conversation);
  // The worker's run lock is what guarantees one run; a lock whose job is gone is stale, and the
  // worker ends it when the new run comes.
  const active = await agentRunsRepository(deps.db).activeRun(conversation.id);
  if (active && (await withJobQueue(deps, () => isAgentRunJobAlive(deps.queues, conversation.id, active, engineId)))) {
    throw new ConflictError("The agent is already running in this conversation");
  }
  await withJobQueue(deps, () => enqueueAgentRun(deps.queues, conversation.id, undefined, engineId), {
    conversation_id: conversation.id,
  });
};

/**
 * Asks a worker to stop and remove the conversation's sandbox; its record and events are kept. A
 * conversation whose sandbox is already gone needs no job.
 */
export const deleteConversation = async (
  deps: ConversationDeps,
  caller: Caller,
  conversationId: string,
): Promise<void> => {
  const conversation = await ownedConversation(deps, caller, conversationId);
  // The conversation's session key ends with it, whatever becomes of the sandbox.
  await conversationsRepository(deps.db).revokeSessionKey(conversation.id);
  if (conversation.sandboxStatus === "MISSING") return;
  // To the engine that holds the sandbox: only its workers can remove it.
  const engineId = await engineOf(deps, conversation);
  await withJobQueue(
    deps,
    () => enqueue(deps.queues, "sandbox.remove", { conversationId: conversation.id }, { engineId }),
    { conversation_id: conversation.id },
  );
};
