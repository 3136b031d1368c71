import { newId } from "@tern/core";
import type { Kysely } from "kysely";
import type { Database } from "../schema.ts";

/** A start task's owner and state, as a sender to its pending queue needs them. */
export interface PendingQueueTask {
  id: string;
  status: string;
  appConversationId: string | null;
}

/** A message that waited for its start task, in the order it came. */
export interface PendingMessage {
  id: string;
  content: unknown;
}

/**
 * Messages sent to a start task before its conversation exists (`task-<id>` as conversation id),
 * delivered into the conversation when the task is READY. Every method runs in the caller's
 * transaction: the queue and the task's READY are seen together, never one without the other.
 */
export const pendingMessagesRepository = (db: Kysely<Database>) => ({
  /** The user's start task, its row locked until the transaction ends (so READY waits for a sender). */
  async lockTaskOfUser(taskId: string, userId: string): Promise<PendingQueueTask | null> {
    const row = await db
      .selectFrom("start_tasks")
      .select(["id", "status", "app_conversation_id"])
      .where("id", "=", taskId)
      .where("user_id", "=", userId)
      .forUpdate()
      .executeTakeFirst();
    return row ? { id: row.id, status: row.status, appConversationId: row.app_conversation_id } : null;
  },

  /** Locks the task's row (as lockTaskOfUser, for the side that marks it READY). */
  async lockTask(taskId: string): Promise<void> {
    await db.selectFrom("start_tasks").select("id").where("id", "=", taskId).forUpdate().execute();
  },

  /** How many messages wait for the task. */
  async count(taskId: string): Promise<number> {
    const { n } = await db
      .selectFrom("pending_messages")
      .select((eb) => eb.fn.countAll<string>().as("n"))
      .where("start_task_id", "=", taskId)
      .executeTakeFirstOrThrow();
    return Number(n);
  },

  /** Queues one message for the task; its id. */
  async add(taskId: string, content: unknown): Promise<string> {
    const id = newId();
    await db
      .insertInto("pending_messages")
      .values({ id, start_task_id: taskId, content: JSON.stringify(content) })
      .execute();
    return id;
  },

  /** Removes and returns the task's waiting messages, oldest first. */
  async takeAll(taskId: string): Promise<PendingMessage[]> {
    const rows = await db
      .deleteFrom("pending_messages")
      .where("start_task_id", "=", taskId)
      .returning(["id", "content", "created_at"])
      .execute();
    rows.sort((a, b) =>
      a.created_at === b.created_at ? a.id.localeCompare(b.id) : a.created_at < b.created_at ? -1 : 1,
    );
    return rows.map((r) => ({ id: r.id, content: r.content }));
  },
});
