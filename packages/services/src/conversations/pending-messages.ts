import {
  ConflictError,
  type MessageContent,
  NotFoundError,
  newEvent,
  newId,
  parseId,
  RateLimitedError,
} from "@tern/core";
import { type Database, eventsRepository, pendingMessagesRepository } from "@tern/db";
import type { Kysely } from "kysely";
import type { ConversationDeps } from "../deps.ts";
import type { Caller } from "../ownership.ts";
import { assertMessageSize } from "../quotas.ts";
import { maskMessageContent } from "../secrets.ts";
import { sendMessage } from "./send-message.ts";

/** OpenHands' limit of messages queued for one start task. */
export const MAX_PENDING_MESSAGES = 10;

export interface PendingMessageResult {
  id: string;
  queued: boolean;
  position: number;
}

/**
 * OpenHands' POST /conversations/{id}/pending-messages. `task-{hex}` names a start task: before
 * READY the message waits (at most MAX_PENDING_MESSAGES per task, then 429), in order; at READY
 * the worker delivers the queue (deliverPendingMessages). A task already READY, or a conversation
 * id, gets the message at once with a run. The task row's lock orders this against delivery, so
 * no message is queued after its queue was delivered.
 */
export const queuePendingMessage = async (
  deps: ConversationDeps,
  caller: Caller,
  rawId: string,
  content: MessageContent[],
): Promise<PendingMessageResult> => {
  assertMessageSize(content, deps.limits);
  const taskHex = rawId.startsWith("task-") ? rawId.slice(5) : null;
  if (taskHex === null) {
    await sendMessage(deps, caller, rawId, { content, run: true });
    return { id: newId().replaceAll("-", ""), queued: false, position: 0 };
  }
  const taskId = parseId(taskHex);
  // Stored as every user message is: the conversation's secret values masked (the start's own
  // secrets are known by now; the task's owner is checked below, and no other task's are read).
  const stored =
    taskId && deps.secretBox
      ? await maskMessageContent(
          { db: deps.db, secretBox: deps.secretBox },
          { userId: caller.userId, startTaskId: taskId },
          content,
        )
      : content;
  const queued = await deps.db.transaction().execute(async (trx) => {
    const pending = pendingMessagesRepository(trx);
    const task = taskId ? await pending.lockTaskOfUser(taskId, caller.userId) : null;
    if (!task || caller.conversationId !== undefined) return { kind: "missing" as const };
    if (task.status === "ERROR") return { kind: "failed" as const };
    if (task.status === "READY" && task.appConversationId) {
      return { kind: "ready" as const, conversationId: task.appConversationId };
    }
    const n = await pending.count(task.id);
    if (n >= MAX_PENDING_MESSAGES) return { kind: "full" as const };
    const id = await pending.add(task.id, stored);
    return { kind: "queued" as const, id, position: n + 1 };
  });
  switch (queued.kind) {
    case "missing":
      throw new NotFoundError("No such start task");
    case "failed":
      throw new ConflictError("The start task failed; its conversation will not start");
    case "full":
      throw new RateLimitedError(`At most ${MAX_PENDING_MESSAGES} messages may wait for a start task`, 5);
    case "ready":
      await sendMessage(deps, caller, queued.conversationId, { content, run: true });
      return { id: newId().replaceAll("-", ""), queued: false, position: 0 };
    case "queued":
      return { id: queued.id.replaceAll("-", ""), queued: true, position: queued.position };
  }
};

/**
 * Delivers the messages queued for a start task into its conversation, in order, and deletes
 * them; run in the transaction that marks the task READY (so a sender sees either the queue or
 * READY). Returns how many there were; the caller asks for a run in that transaction when there were any.
 */
export const deliverPendingMessages = async (
  trx: Kysely<Database>,
  taskId: string,
  conversationId: string,
): Promise<number> => {
  const pending = pendingMessagesRepository(trx);
  await pending.lockTask(taskId);
  const rows = await pending.takeAll(taskId);
  if (rows.length === 0) return 0;
  await eventsRepository(trx).append(
    conversationId,
    rows.map((r) => newEvent.userMessage(r.content as MessageContent[])),
  );
  return rows.length;
};
