import { newId } from "@tern/core";
import { sandboxesRepository, startTasksRepository } from "@tern/db";
import { SandboxLabel, type SandboxSpec } from "@tern/sandbox";
import {
  type AcquiredSandbox,
  containerNameForTask,
  conversationIdForTask,
  LostOwnership,
  type StartContext,
} from "./context.ts";

/** WAITING_FOR_SANDBOX: the task's container, adopted when an earlier attempt made it, else warm or new. */
export const acquireSandbox = async (ctx: StartContext): Promise<AcquiredSandbox> => {
  const { deps, task } = ctx;
  const { config } = deps;
  const sandboxes = sandboxesRepository(deps.db);

  let row: { id: string; containerName: string } | null = await sandboxes.findByTask(task.id);
  let containerId: string | null = null;
  let emptyWorkspaceReady = false;
  if (!row && deps.pool) {
    // The pool's onClaim records the sandboxes row (this id, this task) before the claim returns.
    const sandboxId = newId();
    const warm = await deps.pool.claim({ taskId: task.id, sandboxId });
    if (warm) {
      containerId = warm.id;
      emptyWorkspaceReady = true;
      // Already recorded by onClaim: no second write.
      row = { id: sandboxId, containerName: warm.name };
      ctx.log.info({ container: warm.name }, "took a warm sandbox");
    }
  }
  row ??= await sandboxes.upsert({
    containerName: containerNameForTask(task.id),
    image: config.SANDBOX_IMAGE,
    startTaskId: task.id,
    status: "STARTING",
  });
  if (!containerId) {
    const spec: SandboxSpec = {
      name: row.containerName,
      image: config.SANDBOX_IMAGE,
      labels: {
        [SandboxLabel.Marker]: "1",
        [SandboxLabel.Namespace]: config.REDIS_PREFIX,
        [SandboxLabel.SandboxId]: row.id,
        [SandboxLabel.TaskId]: task.id,
        [SandboxLabel.ConversationId]: conversationIdForTask(task.id),
      },
      limits: { memoryMb: config.SANDBOX_MEMORY_MB, cpus: config.SANDBOX_CPUS, pids: config.SANDBOX_PIDS_LIMIT },
      network: config.SANDBOX_NETWORK,
    };
    const info = await deps.sandboxes.create(spec);
    containerId = info.id;
  }
  await sandboxes.update(row.id, { status: "RUNNING", containerId });
  if (!(await startTasksRepository(deps.db).setSandbox(task.id, ctx.attempt, row.id))) throw new LostOwnership(task.id);
  return { sandboxId: row.id, containerId, containerName: row.containerName, emptyWorkspaceReady };
};
