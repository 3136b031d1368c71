import type { Logger } from "@tern/core";
import type { Database } from "@tern/db";
import { sandboxesRepository } from "@tern/db";
import type { SandboxDriver } from "@tern/sandbox";
import type { Kysely } from "kysely";
import { sandboxNameForTask } from "./context.ts";

/**
 * Removes a failed start's sandbox and marks its row ERROR. Safe to call any number of times, from
 * any worker, whether or not the sandbox or the row exists.
 */
export const releaseTaskSandbox = async (
  deps: { db: Kysely<Database>; sandboxes: SandboxDriver; logger: Logger },
  taskId: string,
): Promise<void> => {
  const sandboxes = sandboxesRepository(deps.db);
  const row = await sandboxes.findByTask(taskId);
  // Its ref, the task's own name, and the row's (a warm sandbox keeps its pool name).
  const targets = new Set([row?.ref, row?.name, sandboxNameForTask(taskId)]);
  for (const t of targets) if (t) await deps.sandboxes.destroy(t);
  if (row) await sandboxes.update(row.id, { status: "ERROR" });
  deps.logger.info(
    { task_id: taskId, sandbox: row?.name ?? sandboxNameForTask(taskId) },
    "sandbox of failed start removed",
  );
};
