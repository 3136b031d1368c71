import type { Kysely } from "kysely";
import { loadSqlCommands } from "../sql.ts";

/**
 * One definition of opening a conversation and of the webhook outbox, as named SQL files (sql/):
 * - tern_webhook_outbox: the one insert of webhook deliveries, which every writer calls:
 *   tern_event_webhooks (the deliveries of appended events: the append, a run's steps, the first
 *   events) and tern_task_webhooks (a start task's status);
 * - tern_request_run: a run asked for (a queued agent_runs row);
 * - tern_open_conversation: a conversation's row, its sandbox's link, its first events and their
 *   deliveries, for the worker's pipeline and the API's warm claim alike;
 * - tern_warm_claim, loaded again: it opens the conversation through tern_open_conversation.
 * In the order they call each other (an SQL-language body is checked when it is created).
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await loadSqlCommands(db, [
    "tern_iso",
    "tern_webhook_outbox",
    "tern_event_webhooks",
    "tern_task_webhooks",
    "tern_request_run",
    "tern_open_conversation",
    "tern_warm_claim",
  ]);
}

/**
 * The functions stay: tern_warm_claim, as its file defines it (migration 0400 loads the same file),
 * calls them, and no older text of it is kept to go back to.
 */
export async function down(): Promise<void> {}
