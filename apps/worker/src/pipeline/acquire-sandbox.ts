import { metrics, newId } from "@tern/core";
import { sandboxesRepository, startTasksRepository } from "@tern/db";
import { SandboxLabel, type SandboxRef, type SandboxSpec } from "@tern/sandbox";
import { sandboxLimitsOf } from "../config.ts";
import { runtimeImageOfSpec, specOfStartTask } from "../sandbox/spec-image.ts";
import { emptyWorkspaceImage, forgetEmptyWorkspaceImage } from "../sandbox/workspace-image.ts";
import {
  type AcquiredSandbox,
  conversationIdForTask,
  LostOwnership,
  type StartContext,
  sandboxNameForTask,
} from "./context.ts";

/** WAITING_FOR_SANDBOX: the task's sandbox, adopted when an earlier attempt made it, else warm or new. */
export const acquireSandbox = async (
  ctx: StartContext,
  /** A fresh sandbox's own name (startOverIfRepositoryCodeRan); otherwise the task's. */
  name: string = sandboxNameForTask(ctx.task.id),
  /**
   * A repository snapshot's image (repo-snapshot.ts): never a warm sandbox then. It may be still
   * looked up: the task's sandbox row is looked up meanwhile.
   */
  snapshotImageLookup?: string | Promise<string | undefined>,
): Promise<AcquiredSandbox> => {
  const { deps, task } = ctx;
  const { config } = deps;
  const sandboxes = sandboxesRepository(deps.db);

  const [found, snapshotImage] = await Promise.all([sandboxes.findByTask(task.id), snapshotImageLookup]);
  // A spec other than the default runs its runtime image (built here on its first start); the row keeps the spec.
  const spec = specOfStartTask(ctx, found?.image);
  const image = snapshotImage ?? config.SANDBOX_IMAGE;
  let row: { id: string; name: string } | null = found;
  // A sandbox's own start (POST /api/v1/sandboxes) finds the row the API wrote, not made yet: it
  // takes a warm sandbox all the same on its first attempt (a later one may find its container made).
  const unmade = found !== null && task.kind === "sandbox" && found.ref === null && ctx.attempt === 1;
  if (found && found.engineId === null && found.ref === null && deps.engineId) {
    // Written by the API, which knows no engine: recorded on this one now.
    await sandboxes.update(found.id, { engineId: deps.engineId });
  } else if (found && found.engineId !== deps.engineId) {
    // An earlier attempt made the sandbox on another engine (its worker died and this one took the
    // job over): this worker cannot reach it, so the start makes it again here, every stage anew.
    // The row says where it is now; the other engine's janitor removes the container left there.
    await sandboxes.update(found.id, { engineId: deps.engineId, ref: null, status: "STARTING" });
    ctx.log.warn(
      { sandbox: found.name, from_engine: found.engineId, engine_id: deps.engineId },
      "the start's sandbox was on another engine; making it again on this one",
    );
  }
  let ref: SandboxRef | null = null;
  let emptyWorkspaceReady = false;
  if ((!row || unmade) && deps.pool && !snapshotImage && !spec) {
    // The pool's onClaim records the sandboxes row (this id, this task) before the claim returns.
    const sandboxId = row?.id ?? newId();
    const warm = await deps.pool.claim({ taskId: task.id, sandboxId });
    metrics.poolClaims.inc({ result: warm ? "hit" : "miss" });
    if (warm) {
      ref = warm.ref;
      emptyWorkspaceReady = true;
      // Already recorded by onClaim: no second write.
      row = { id: sandboxId, name: warm.name };
      ctx.log.info({ sandbox: warm.name }, "took a warm sandbox");
    }
  }
  row ??= await sandboxes.upsert({
    name,
    image: spec ?? image,
    startTaskId: task.id,
    status: "STARTING",
    engineId: deps.engineId,
  });
  if (!ref) {
    // Without a repository the workspace is the empty one: made in the image already when it exists.
    const noRepository = task.kind === "conversation" && !task.request.selected_repository?.trim();
    const prepared = noRepository && !snapshotImage && !spec ? emptyWorkspaceImage(deps) : null;
    const runtimeImage = spec ? await runtimeImageOfSpec(ctx, spec) : null;
    const sandboxSpec: SandboxSpec = {
      name: row.name,
      image: prepared ?? runtimeImage ?? image,
      labels: {
        [SandboxLabel.Marker]: "1",
        [SandboxLabel.Namespace]: config.REDIS_PREFIX,
        [SandboxLabel.SandboxId]: row.id,
        [SandboxLabel.TaskId]: task.id,
        [SandboxLabel.ConversationId]: conversationIdForTask(task.id),
        ...(deps.engineId ? { [SandboxLabel.Engine]: deps.engineId } : {}),
      },
      limits: sandboxLimitsOf(config),
    };
    const info = await deps.sandboxes.create(sandboxSpec).catch(async (err: unknown) => {
      if (!prepared) throw err;
      // Removed underneath (a newer build of the sandbox image replaced it): the sandbox image serves.
      forgetEmptyWorkspaceImage(deps, prepared);
      ctx.log.warn({ err, image: prepared }, "empty-workspace image unusable; creating from the sandbox image");
      return deps.sandboxes.create({ ...sandboxSpec, image });
    });
    ref = info.ref;
    // An adopted sandbox (an earlier attempt's) says which image it was made from.
    emptyWorkspaceReady = prepared !== null && info.image === prepared;
  }
  // Two round trips at once: neither waits on the other.
  const [, owned] = await Promise.all([
    sandboxes.update(row.id, { status: "RUNNING", ref }),
    startTasksRepository(deps.db).setSandbox(task.id, ctx.attempt, row.id),
  ]);
  if (!owned) throw new LostOwnership(task.id);
  return { sandboxId: row.id, ref, name: row.name, emptyWorkspaceReady };
};
