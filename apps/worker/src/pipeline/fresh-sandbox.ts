import type { StartTaskStatus } from "@tern/core";
import { sandboxesRepository } from "@tern/db";
import { type StartContext, sandboxNameForTask } from "./context.ts";

/**
 * The stages from which on the repository's own code may have run in the task's sandbox: its setup
 * script first, and whatever that script changed or left behind afterwards.
 */
const afterRepositoryCode: ReadonlySet<StartTaskStatus> = new Set<StartTaskStatus>([
  "RUNNING_SETUP_SCRIPT",
  "SETTING_UP_GIT_HOOKS",
  "SETTING_UP_SKILLS",
  "STARTING_CONVERSATION",
]);

/**
 * A start taken over (a dead worker) or retried (a passing fault) once the repository's code may
 * have run never goes back through the earlier stages in that container: that code may be watching
 * for them. The container is removed and its row set aside; the attempt starts over in a fresh
 * sandbox of its own name. Returns the name to create the sandbox under, or undefined to adopt
 * or create as usual (the task's fixed name).
 */
export const startOverIfRepositoryCodeRan = async (
  ctx: StartContext,
  previousStatus: StartTaskStatus,
): Promise<string | undefined> => {
  const { deps, task } = ctx;
  if (!afterRepositoryCode.has(previousStatus)) return undefined;
  const sandboxes = sandboxesRepository(deps.db);
  const row = await sandboxes.findByTask(task.id);
  if (row) {
    for (const target of new Set([row.ref, row.name])) if (target) await deps.sandboxes.destroy(target);
    // No longer the task's: the next findByTask finds the fresh one (or none), never this one again.
    await sandboxes.update(row.id, { status: "ERROR", startTaskId: null });
    ctx.log.warn(
      { sandbox: row.name, stage: previousStatus },
      "the repository's code may have run in this start's sandbox: removed, starting over in a fresh one",
    );
  }
  return `${sandboxNameForTask(task.id)}-a${ctx.attempt}`;
};
