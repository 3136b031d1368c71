import { isTerminalStartTaskStatus } from "@tern/core";
import { conversationsRepository, sandboxesRepository, startTasksRepository } from "@tern/db";
import { startJobOptions } from "@tern/queue";
import { PoolOwnerLabel, type SandboxInfo, SandboxLabel } from "@tern/sandbox";
import type { WorkerDeps } from "../deps.ts";
import { isWorkerAlive } from "../liveness.ts";
import { releaseTaskSandbox } from "../pipeline/release-sandbox.ts";
import { finishFailedStart } from "./conversation-start.ts";

/** A task this fresh may still be between its insert and its enqueue (the API does both in turn). */
const RECONCILE_GRACE_MS = 10_000;
/** A warm container without an owner alive is kept this long, in case its owner's key is late. */
const ORPHAN_POOL_GRACE_MS = 60_000;

export interface JanitorReport {
  removedContainers: string[];
  expiredTasks: string[];
  requeuedTasks: string[];
  failedTasks: string[];
}

/** Why a container should go, or null when something live owns it. */
const orphanReason = async (deps: WorkerDeps, c: SandboxInfo): Promise<string | null> => {
  const row = await sandboxesRepository(deps.db).findByContainerName(c.name);
  if (c.labels[SandboxLabel.Pool] === "1" && !row) {
    // Unclaimed warm container: its pool owns it while that worker lives.
    const owner = c.labels[PoolOwnerLabel];
    if (owner && (await isWorkerAlive(deps.redis, deps.config.REDIS_PREFIX, owner))) return null;
    return Date.now() - Date.parse(c.createdAt) > ORPHAN_POOL_GRACE_MS ? "warm container of a worker gone" : null;
  }
  const taskId = row?.startTaskId ?? c.labels[SandboxLabel.TaskId] ?? null;
  const conversationId = row?.conversationId ?? c.labels[SandboxLabel.ConversationId] ?? null;
  const task = taskId ? await startTasksRepository(deps.db).get(taskId) : null;
  if (task && !isTerminalStartTaskStatus(task.status)) return null;
  if (task?.status === "ERROR") return "start failed";
  const conversation = conversationId ? await conversationsRepository(deps.db).get(conversationId) : null;
  if (conversation) return null;
  return task ? "conversation gone" : "no task and no conversation";
};

/** (a) Containers of this deployment, in every state, that no live task or conversation owns. */
export const removeOrphanContainers = async (deps: WorkerDeps): Promise<string[]> => {
  const containers = await deps.sandboxes.list({
    [SandboxLabel.Marker]: "1",
    [SandboxLabel.Namespace]: deps.config.REDIS_PREFIX,
  });
  const removed: string[] = [];
  for (const c of containers) {
    const reason = await orphanReason(deps, c);
    if (!reason) continue;
    await deps.sandboxes.destroy(c.id);
    const row = await sandboxesRepository(deps.db).findByContainerName(c.name);
    if (row && row.status !== "ERROR") await sandboxesRepository(deps.db).update(row.id, { status: "MISSING" });
    deps.logger.info({ container: c.name, state: c.state, reason }, "janitor removed a container");
    removed.push(c.name);
  }
  return removed;
};

/** (b) Tasks that made no progress past START_TASK_DEADLINE end in ERROR, naming the stage. */
export const expireStalledTasks = async (deps: WorkerDeps): Promise<string[]> => {
  const deadline = deps.config.START_TASK_DEADLINE;
  const tasks = startTasksRepository(deps.db);
  const stuck = await tasks.listInFlight({ updatedBefore: new Date(Date.now() - deadline * 1000) });
  const expired: string[] = [];
  for (const t of stuck) {
    const detail = `${t.status}: no progress for ${deadline} s; the start was abandoned, try again`;
    if (!(await tasks.markError(t.id, detail))) continue;
    await releaseTaskSandbox(deps, t.id);
    deps.logger.warn({ task_id: t.id, stage: t.status }, "janitor expired a start task");
    expired.push(t.id);
  }
  return expired;
};

/**
 * (c) Postgres owns the tasks, Redis only carries the work: a task in flight whose job Redis lost
 * gets a new one; one whose job BullMQ gave up on ends in ERROR.
 */
export const reconcileStartJobs = async (deps: WorkerDeps): Promise<{ requeued: string[]; failed: string[] }> => {
  const tasks = startTasksRepository(deps.db);
  const inFlight = await tasks.listInFlight({ updatedBefore: new Date(Date.now() - RECONCILE_GRACE_MS) });
  const requeued: string[] = [];
  const failed: string[] = [];
  for (const t of inFlight) {
    const job = await deps.queues.start.getJob(t.id);
    const state = job ? await job.getState() : "missing";
    if (state === "failed") {
      await finishFailedStart(deps, t.id, "the start job was given up; try again");
      failed.push(t.id);
      continue;
    }
    if (state !== "missing" && state !== "completed" && state !== "unknown") continue;
    if (job) await job.remove().catch(() => undefined);
    await deps.queues.start.add("start", { taskId: t.id, attemptBase: t.attempt }, { ...startJobOptions, jobId: t.id });
    deps.logger.warn({ task_id: t.id, stage: t.status, job_state: state }, "janitor re-enqueued a start task");
    requeued.push(t.id);
  }
  return { requeued, failed };
};

export const runJanitor = async (deps: WorkerDeps): Promise<JanitorReport> => {
  const expiredTasks = await expireStalledTasks(deps);
  const { requeued, failed } = await reconcileStartJobs(deps);
  const removedContainers = await removeOrphanContainers(deps);
  return { removedContainers, expiredTasks, requeuedTasks: requeued, failedTasks: failed };
};

export const janitorProcessor = (deps: WorkerDeps) => async (): Promise<JanitorReport> => runJanitor(deps);
