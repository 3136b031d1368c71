import { isSandboxGone, isTerminalStartTaskStatus } from "@tern/core";
import {
  agentRunsRepository,
  conversationsRepository,
  enginesRepository,
  sandboxesRepository,
  startTasksRepository,
} from "@tern/db";
import { agentRunJob, enqueueAgentRun, findJob } from "@tern/queue";
import { PoolOwnerLabel, type SandboxInfo, SandboxLabel } from "@tern/sandbox";
import { requeueStartTask } from "@tern/services";
import { abandonRun } from "../agent/run-store.ts";
import { pauseIdleSandboxes, removeAgedSandboxes } from "../agent/sandbox-idleness.ts";
import type { WorkerDeps } from "../deps.ts";
import { isLivenessSettled, isWorkerAlive, redisKeptSince } from "../liveness.ts";
import { releaseTaskSandbox } from "../pipeline/release-sandbox.ts";
import { removeOrphanSnapshots } from "../pipeline/repo-snapshot.ts";
import { removeRuntimeImagesOfSpecsGone } from "../sandbox/spec-image.ts";
import { finishFailedStart } from "./conversation-start.ts";

/**
 * A task this fresh may still be between its insert and its enqueue (the API does both in turn), and
 * a container this young between its create and the commit of the rows that own it.
 */
const RECONCILE_GRACE_MS = 10_000;
const LIVE_STATUSES = new Set(["STARTING", "RUNNING", "PAUSED"]);

export interface JanitorReport {
  removedContainers: string[];
  expiredTasks: string[];
  requeuedTasks: string[];
  failedTasks: string[];
  /** Runs not ended whose job Redis lost (added again), and those whose job was given up (ended in error). */
  requeuedRuns: string[];
  failedRuns: string[];
  /** Sandboxes paused for idleness (SANDBOX_IDLE_PAUSE) and removed for age (SANDBOX_MAX_AGE). */
  pausedSandboxes: string[];
  agedSandboxes: string[];
  /** Sandboxes marked MISSING because their engine had no worker for ENGINE_LOST_AFTER. */
  lostSandboxes: string[];
  /** Repository snapshot images no row owns any more (their user removed, evicted, never recorded). */
  removedSnapshots: string[];
  /** Runtime images of sandbox specs no longer offered. */
  removedRuntimeImages: string[];
}

/** Why a sandbox should go, or null when something live owns it. */
const orphanReason = async (deps: WorkerDeps, c: SandboxInfo): Promise<string | null> => {
  const row = await sandboxesRepository(deps.db).findByName(c.name);
  // Postgres says which engine owns what: a container whose row moved to another engine (a start
  // made again there) or was given up on with this engine (lost, then back) is left over here.
  if (row?.engineId && deps.engineId && row.engineId !== deps.engineId) return "its sandbox is on another engine now";
  if (row?.status === "MISSING" && row.engineLostAt) return "given up on while its engine was lost";
  // Failed, or started over in a fresh sandbox (maybe on another engine, which could not remove this one).
  if (row?.status === "ERROR") return "its start failed or started over";
  if (c.labels[SandboxLabel.Pool] === "1" && !row) {
    // Unclaimed warm sandbox: its pool owns it while that worker lives.
    const owner = c.labels[PoolOwnerLabel];
    if (owner && (await isWorkerAlive(deps.redis, deps.config.REDIS_PREFIX, owner))) return null;
    // Redis may have lost every liveness key lately: owners get a whole TTL to renew theirs.
    if (!(await isLivenessSettled(deps.redis, deps.config.REDIS_PREFIX))) return null;
    const grace = deps.config.POOL_ORPHAN_GRACE_MS;
    return Date.now() - Date.parse(c.createdAt) > grace ? "warm container of a worker gone" : null;
  }
  const taskId = row?.startTaskId ?? c.labels[SandboxLabel.TaskId] ?? null;
  const conversationId = row?.conversationId ?? c.labels[SandboxLabel.ConversationId] ?? null;
  const task = taskId ? await startTasksRepository(deps.db).get(taskId) : null;
  if (task && !isTerminalStartTaskStatus(task.status)) return null;
  if (task?.status === "ERROR") return "start failed";
  // A sandbox made on its own (POST /api/v1/sandboxes) has no conversation: its row says whether it lives.
  if (task?.kind === "sandbox" && row && LIVE_STATUSES.has(row.status)) return null;
  const conversation = conversationId ? await conversationsRepository(deps.db).get(conversationId) : null;
  if (conversation) return null;
  if (task) return "conversation gone";
  // Nothing in Postgres names it yet: a container made just before the rows that will own it commit
  // (a sandbox created on its own, or a fixture's) gets the same grace as a task between its writes.
  if (!row && Date.now() - Date.parse(c.createdAt) < RECONCILE_GRACE_MS) return null;
  return "no task and no conversation";
};

/** (a) Sandboxes of this deployment, in every state, that no live task or conversation owns. */
const removeOrphanContainers = async (deps: WorkerDeps): Promise<string[]> => {
  const containers = await deps.sandboxes.list({
    [SandboxLabel.Marker]: "1",
    [SandboxLabel.Namespace]: deps.config.REDIS_PREFIX,
  });
  // Rows from before engines were recorded learn theirs: the engine where the container is.
  if (deps.engineId) {
    const recorded = await sandboxesRepository(deps.db).recordEngine(
      containers.map((c) => c.name),
      deps.engineId,
    );
    if (recorded > 0)
      deps.logger.info({ engine_id: deps.engineId, sandboxes: recorded }, "janitor recorded sandboxes' engine");
  }
  const removed: string[] = [];
  for (const c of containers) {
    const reason = await orphanReason(deps, c);
    if (!reason) continue;
    await deps.sandboxes.destroy(c.ref);
    const row = await sandboxesRepository(deps.db).findByName(c.name);
    // The row of a sandbox moved to another engine is that engine's: left as it is.
    const elsewhere = row?.engineId && deps.engineId && row.engineId !== deps.engineId;
    if (row && !isSandboxGone(row.status) && !elsewhere) {
      await sandboxesRepository(deps.db).update(row.id, { status: "MISSING" });
    }
    deps.logger.info({ sandbox: c.name, state: c.state, reason }, "janitor removed a sandbox");
    removed.push(c.name);
  }
  return removed;
};

/** (b) Tasks that made no progress past START_TASK_DEADLINE end in ERROR, naming the stage. */
const expireStalledTasks = async (deps: WorkerDeps): Promise<string[]> => {
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
const reconcileStartJobs = async (deps: WorkerDeps): Promise<{ requeued: string[]; failed: string[] }> => {
  const tasks = startTasksRepository(deps.db);
  // A task last written before Redis lost its data had its job (if any) lost with it: no grace.
  const keptSince = await redisKeptSince(deps.redis, deps.config.REDIS_PREFIX);
  const cutoff = Math.max(Date.now() - RECONCILE_GRACE_MS, keptSince);
  const inFlight = await tasks.listInFlight({ updatedBefore: new Date(cutoff) });
  const requeued: string[] = [];
  const failed: string[] = [];
  for (const t of inFlight) {
    const job = await findJob(deps.queues, "conversation.start", t.id);
    const state = job ? await job.getState() : "missing";
    if (state === "failed") {
      await finishFailedStart(deps, t.id, "the start job was given up; try again");
      failed.push(t.id);
      continue;
    }
    if (state !== "missing" && state !== "completed" && state !== "unknown") continue;
    if (job) await job.remove().catch(() => undefined);
    await requeueStartTask(deps, t);
    deps.logger.warn({ task_id: t.id, stage: t.status, job_state: state }, "janitor re-enqueued a start task");
    requeued.push(t.id);
  }
  return { requeued, failed };
};

/**
 * (d) The same for runs: a run is a row from the transaction that asked for it until it ends, and
 * its job only a copy. A run not ended whose job Redis lost (or whose asker died between its
 * commit and the add) gets its job again, under the same id, so a job that was only late is not
 * doubled and a second delivery meets the run's lock; one whose job BullMQ gave up on (stalled
 * too often) ends in error.
 */
const reconcileRunJobs = async (deps: WorkerDeps): Promise<{ requeued: string[]; failed: string[] }> => {
  // A run asked for before Redis lost its data had its job (if any) lost with it: no grace.
  const keptSince = await redisKeptSince(deps.redis, deps.config.REDIS_PREFIX);
  const cutoff = Math.max(Date.now() - RECONCILE_GRACE_MS, keptSince);
  const open = await agentRunsRepository(deps.db).open(new Date(cutoff));
  const requeued: string[] = [];
  const failed: string[] = [];
  for (const asked of open) {
    let run = asked;
    let { state, job } = await agentRunJob(deps.queues, run);
    // Taken from the shared queue and forwarded to its sandbox's engine (workers.ts): that queue holds it.
    const forwardedTo = (job?.returnvalue as { forwardedTo?: string } | null)?.forwardedTo;
    if (state === "completed" && forwardedTo && forwardedTo !== run.engineId) {
      run = { ...run, engineId: forwardedTo };
      ({ state, job } = await agentRunJob(deps.queues, run));
    }
    const log = { conversation_id: run.conversationId, run_id: run.runId, run_status: run.status, job_state: state };
    if (state === "failed") {
      await abandonRun(deps.db, run.conversationId, run.runId, "its job was given up");
      deps.logger.warn(log, "janitor ended a run whose job was given up");
      failed.push(run.runId);
      continue;
    }
    // A completed job whose run is not ended: the worker that ran it lost the run to a newer attempt.
    if (state !== "missing" && state !== "completed") continue;
    if (job) await job.remove().catch(() => undefined);
    await enqueueAgentRun(deps.queues, run.conversationId, run.runId, run.engineId);
    deps.logger.warn(log, "janitor re-enqueued an agent run");
    requeued.push(run.runId);
  }
  return { requeued, failed };
};

/**
 * (e) Engines without a live worker for ENGINE_LOST_AFTER are given up on (any engine's janitor
 * does it, once): their live sandboxes become MISSING, saying so (a follow-up gets 410), the runs
 * holding their conversations end in error, and the jobs waiting on their queues are dropped. The
 * conversations and their events stay; until then those jobs only waited.
 */
const giveUpLostEngines = async (deps: WorkerDeps): Promise<string[]> => {
  const givenUp = await enginesRepository(deps.db).giveUpSilent(deps.config.ENGINE_LOST_AFTER);
  for (const engineId of givenUp) {
    deps.logger.warn(
      { engine_id: engineId, after_s: deps.config.ENGINE_LOST_AFTER },
      "an engine is lost: no worker of it alive",
    );
    const queues = deps.queues.forEngine(engineId);
    await Promise.all([queues.agentRun.drain(true), queues.sandbox.drain(true)]).catch((err) =>
      deps.logger.warn({ err, engine_id: engineId }, "dropping a lost engine's jobs failed"),
    );
  }
  const lost = await sandboxesRepository(deps.db).markLostWithEngines();
  const runs = agentRunsRepository(deps.db);
  for (const s of lost) {
    if (s.conversationId) {
      // The run holding the conversation, and those asked for after it: none can run any more.
      const ofConversation = await runs.open(new Date(), { conversationId: s.conversationId });
      for (const run of ofConversation) {
        await abandonRun(deps.db, s.conversationId, run.runId, `its sandbox was lost with its engine (${s.engineId})`);
      }
    }
    deps.logger.warn(
      { sandbox_id: s.sandboxId, conversation_id: s.conversationId, engine_id: s.engineId },
      "sandbox lost with its engine; marked MISSING",
    );
  }
  return lost.map((s) => s.sandboxId);
};

export const runJanitor = async (deps: WorkerDeps): Promise<JanitorReport> => {
  const lostSandboxes = await giveUpLostEngines(deps);
  const expiredTasks = await expireStalledTasks(deps);
  const { requeued, failed } = await reconcileStartJobs(deps);
  const runs = await reconcileRunJobs(deps);
  const removedContainers = await removeOrphanContainers(deps);
  const agedSandboxes = await removeAgedSandboxes(deps, deps.config.SANDBOX_MAX_AGE);
  const pausedSandboxes = await pauseIdleSandboxes(deps, deps.config.SANDBOX_IDLE_PAUSE);
  const removedSnapshots = await removeOrphanSnapshots(deps);
  const removedRuntimeImages = await removeRuntimeImagesOfSpecsGone(deps);
  return {
    removedSnapshots,
    removedRuntimeImages,
    removedContainers,
    expiredTasks,
    requeuedTasks: requeued,
    failedTasks: failed,
    requeuedRuns: runs.requeued,
    failedRuns: runs.failed,
    pausedSandboxes,
    agedSandboxes,
    lostSandboxes,
  };
};

export const janitorProcessor = (deps: WorkerDeps) => async (): Promise<JanitorReport> => runJanitor(deps);
