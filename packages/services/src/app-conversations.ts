import {
  ConflictError,
  type Conversation,
  type ConversationUpdateRequest,
  GoneError,
  isSafeBranchName,
  type MessageContent,
  NotFoundError,
  newEvent,
  newId,
  parseId,
  parseRepositoryName,
  RateLimitedError,
  repositoryNameForm,
  type SandboxStatus,
  type StartRequest,
  UnavailableError,
  ValidationError,
} from "@tern/core";
import {
  conversationsRepository,
  type Database,
  eventsRepository,
  pendingMessagesRepository,
  sandboxesRepository,
} from "@tern/db";
import { enqueueAgentRun } from "@tern/queue";
import type { Kysely } from "kysely";
import type { ConversationDeps, ServiceDeps } from "./deps.ts";
import { sendMessage } from "./follow-ups.ts";
import { type Caller, ownedConversation } from "./ownership.ts";
import { assertMessageSize } from "./quotas.ts";
import { maskMessageContent } from "./secrets.ts";

const fieldError = (field: string, message: string) =>
  new ValidationError(`${field}: ${message}`, [{ field, in: "json", message }]);

/**
 * What the start request means before the task is written: a parent of the caller's (404
 * otherwise) lends its repository, branch, provider and model where the request gives none, and a
 * `conversation_id` must be free (409). Returns the request as it is kept on the task.
 */
export const resolveStartRequest = async (
  deps: Pick<ServiceDeps, "db">,
  userId: string,
  request: StartRequest,
): Promise<StartRequest> => {
  let resolved = request;
  if (request.parent_conversation_id) {
    const parent = await ownedConversation(deps, { userId }, request.parent_conversation_id);
    resolved = {
      ...resolved,
      ...(resolved.selected_repository == null && parent.selectedRepository
        ? {
            selected_repository: parent.selectedRepository,
            selected_branch: resolved.selected_branch ?? parent.selectedBranch,
            git_provider: resolved.git_provider ?? parent.gitProvider,
          }
        : {}),
      llm_model: resolved.llm_model ?? parent.llmModel,
    };
  }
  if (request.conversation_id) {
    const id = request.conversation_id;
    const taken = await deps.db
      .selectNoFrom((eb) => [
        eb.exists(eb.selectFrom("conversations").select("id").where("id", "=", id)).as("conversation"),
        eb
          .exists(
            eb
              .selectFrom("start_tasks")
              .select("id")
              .where("status", "!=", "ERROR")
              .where((w) => w(w.ref("request", "->>").key("conversation_id"), "=", id)),
          )
          .as("task"),
      ])
      .executeTakeFirstOrThrow();
    if (taken.conversation || taken.task)
      throw new ConflictError("conversation_id: a conversation with this id exists");
  }
  return resolved;
};

/** PATCH: changes the fields given (OpenHands' AppConversationUpdateRequest rules). */
export const updateConversation = async (
  deps: Pick<ServiceDeps, "db">,
  caller: Caller,
  rawId: string,
  patch: ConversationUpdateRequest,
): Promise<Conversation> => {
  const conversation = await ownedConversation(deps, caller, rawId);
  const repository =
    patch.selected_repository !== undefined ? patch.selected_repository : conversation.selectedRepository;
  const provider = patch.git_provider !== undefined ? patch.git_provider : conversation.gitProvider;
  if (patch.selected_repository === null) {
    const branch = patch.selected_branch !== undefined ? patch.selected_branch : conversation.selectedBranch;
    if (branch !== null) throw fieldError("selected_branch", "must be cleared (null) with the repository");
    if (provider !== null) throw fieldError("git_provider", "must be cleared (null) with the repository");
  }
  if (repository != null && parseRepositoryName(repository, provider ?? "github") === null) {
    throw fieldError("selected_repository", `must be of the form ${repositoryNameForm(provider ?? "github")}`);
  }
  if (patch.selected_branch != null && !isSafeBranchName(patch.selected_branch)) {
    throw fieldError("selected_branch", "must be a valid git branch name");
  }
  await conversationsRepository(deps.db).update(conversation.id, {
    title: patch.title,
    public: patch.public,
    selectedRepository: patch.selected_repository,
    selectedBranch: patch.selected_branch,
    gitProvider: patch.git_provider,
  });
  return ownedConversation(deps, caller, conversation.id);
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
    if (!sandbox?.idlePausedAt) {
      throw new ConflictError(
        `The conversation's sandbox is paused; resume it first (POST /api/v1/sandboxes/${conversation.sandboxId?.replaceAll("-", "")}/resume)`,
      );
    }
  }
  await sendMessage(deps, caller, conversation.id, message);
  return {
    success: true,
    sandbox_status: status === "PAUSED" ? "RUNNING" : status,
    message: message.run ? "Message sent; the agent runs" : "Message stored",
  };
};

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
 * READY). Returns how many there were; the caller then asks for a run when there were any.
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

/** After delivery: a run to answer the delivered messages (a run in progress takes them up). */
export const runForDeliveredMessages = (deps: Pick<ConversationDeps, "queues">, conversationId: string) =>
  enqueueAgentRun(deps.queues, conversationId);
