import { isPermanentFault, isTerminalStartTaskStatus, metrics, type StartTaskStatus, withSpan } from "@tern/core";
import { type FinishedStage, repoSnapshotsRepository, startTasksRepository } from "@tern/db";
import type { JobPayload } from "@tern/queue";
import { deliverPendingMessages, enqueueRun, requestRun } from "@tern/services";
import { type Job, UnrecoverableError } from "bullmq";
import type { WorkerDeps } from "../deps.ts";
import type { WorkerClone } from "../git/clone.ts";
import { acquireSandbox } from "../pipeline/acquire-sandbox.ts";
import { LostOwnership, type StartContext } from "../pipeline/context.ts";
import { startOverIfRepositoryCodeRan } from "../pipeline/fresh-sandbox.ts";
import { openStartedConversation } from "../pipeline/open-conversation.ts";
import { beginClone, prepareRepository } from "../pipeline/prepare-repository.ts";
import { releaseTaskSandbox } from "../pipeline/release-sandbox.ts";
import {
  acquireSandboxForStart,
  beginSnapshot,
  type SnapshotInProgress,
  type SnapshotPlan,
} from "../pipeline/repo-snapshot.ts";
import { runSetupScript, setupScriptMayRun } from "../pipeline/run-setup-script.ts";
import { setUpGitHooks } from "../pipeline/set-up-git-hooks.ts";
import { setUpSkills } from "../pipeline/set-up-skills.ts";
import { fromSnapshotDetail, recordedStageResults, stageResultsOf } from "../pipeline/snapshot-stages.ts";
import { newStageClock, timedDeps, timingsOf } from "../pipeline/stage-timing.ts";
import { emptyWorkspaceImage } from "../sandbox/workspace-image.ts";
import type { JobProcessor } from "./types.ts";

/**
 * The fencing token of a job attempt. BullMQ counts every start of the job, including a takeover
 * after a stall; `attemptBase` lifts a job the reconciler re-created above the attempts before it.
 */
const attemptOf = (job: Job<JobPayload<"conversation.start">>): number =>
  (job.data.attemptBase ?? 0) + Math.max(1, job.attemptsStarted);

const TASK_VISIBLE_WAIT_MS = 3_000;

/**
 * The API adds the job inside the transaction that inserts the task, so a job can arrive a moment
 * before its task is visible. Wait for it a little, then let BullMQ retry with backoff; a task that
 * never appears (its transaction rolled back) makes the job fail with nothing to clean up.
 */
const claimWhenVisible = async (deps: WorkerDeps, taskId: string, attempt: number) => {
  const tasks = startTasksRepository(deps.db);
  const deadline = Date.now() + TASK_VISIBLE_WAIT_MS;
  // The API commits a moment after its job is added: look again soon, then back off.
  for (let wait = 2; ; wait = Math.min(wait * 2, 250)) {
    const claimed = await tasks.claim(taskId, attempt);
    if (claimed) return claimed;
    const seen = await tasks.get(taskId);
    // Visible now but not when the claim ran (the API's transaction committed in between): claim again.
    if (seen && (isTerminalStartTaskStatus(seen.status) || seen.attempt > attempt)) return null;
    if (seen && Date.now() <= deadline) continue;
    if (Date.now() > deadline) throw new Error(`start task ${taskId} does not exist (yet)`);
    await new Promise((r) => setTimeout(r, wait));
  }
};

/**
 * Takes one start task through every stage. Each stage is persisted the moment it begins, with
 * the time the previous one took, and every write carries the attempt: a worker that lost the
 * task (it stalled and another took over) is refused and stops.
 */
export const conversationStartProcessor = (deps: WorkerDeps): JobProcessor<"conversation.start"> => {
  // Made (or found) before the first start needs it.
  emptyWorkspaceImage(deps);
  return async (job) => {
    const attempt = attemptOf(job);
    const log = deps.logger.child({ task_id: job.data.taskId, attempt });
    const task = await claimWhenVisible(deps, job.data.taskId, attempt);
    if (!task) {
      log.info("start task already finished or owned by a newer attempt; nothing to do");
      return;
    }
    // Every database and engine call of this start is counted to the stage it ran in.
    const clock = newStageClock();
    const ctx: StartContext = { deps: timedDeps(deps, clock), task, attempt, log };
    const tasks = startTasksRepository(ctx.deps.db);

    /** `passed`: the stage's result was known ahead; stage_history gets it with this detail. */
    let current: { stage: StartTaskStatus; started: number; passed?: string } | null = null;
    /** Stages that ended unwritten (nothing to do in them): their durations ride on the next write. */
    let unwritten: Record<string, number> = {};
    /** Of those, the ones passed with a known result: the next write enters them in stage_history. */
    let unwrittenPassed: NonNullable<FinishedStage["passed"]> = [];
    const finish = (): FinishedStage | undefined => {
      if (!current) return undefined;
      const ms = Date.now() - current.started;
      metrics.startStageDuration.observe({ path: "queued", stage: current.stage }, ms / 1000);
      const timings = { ...unwritten, ...timingsOf(clock, current.stage) };
      const passed =
        current.passed === undefined
          ? unwrittenPassed
          : [...unwrittenPassed, { status: current.stage, detail: current.passed }];
      unwritten = {};
      unwrittenPassed = [];
      return { stage: current.stage, ms, timings, ...(passed.length > 0 ? { passed } : {}) };
    };
    /**
     * `overlap`: the stage's work begins while its entry is written (the engine's create does not wait
     * for a commit); a refused entry still stops the attempt, and `fence` undoes what the work made.
     * `skipWrite`: a stage known to do nothing here is not written on its own; the next write carries it.
     * `passed`: a stage whose result is known ahead (a repository snapshot recorded it) is not written
     * on its own either; the next write enters it in stage_history with this detail.
     */
    const stage = async <T>(
      status: StartTaskStatus,
      run: () => Promise<T>,
      opts: { overlap?: (made: T) => Promise<void>; skipWrite?: boolean; passed?: string } = {},
    ): Promise<T> => {
      const finished = finish();
      clock.stage = status;
      const traced = () => withSpan(`stage ${status}`, { "tern.task_id": task.id, "tern.stage": status, attempt }, run);
      if (opts.skipWrite || opts.passed !== undefined) {
        if (finished) {
          unwritten = { ...finished.timings, [finished.stage]: finished.ms };
          unwrittenPassed = finished.passed ?? [];
        }
        current = { stage: status, started: Date.now(), ...(opts.passed !== undefined ? { passed: opts.passed } : {}) };
        return traced();
      }
      if (opts.overlap) {
        current = { stage: status, started: Date.now() };
        const entering = tasks.enterStage(task.id, attempt, status, finished);
        const working = traced();
        const [entered, made] = await Promise.allSettled([entering, working]);
        if (entered.status === "rejected") {
          if (made.status === "fulfilled") await opts.overlap(made.value).catch(() => undefined);
          throw entered.reason;
        }
        if (!entered.value) {
          if (made.status === "fulfilled") await opts.overlap(made.value).catch(() => undefined);
          throw new LostOwnership(task.id);
        }
        if (made.status === "rejected") throw made.reason;
        log.debug({ stage: status }, "stage begins");
        return made.value;
      }
      if (!(await tasks.enterStage(task.id, attempt, status, finished))) throw new LostOwnership(task.id);
      current = { stage: status, started: Date.now() };
      log.debug({ stage: status }, "stage begins");
      return traced();
    };

    let snapshot: SnapshotPlan | null = null;
    /** The repository's clone on the worker, made while the sandbox is. */
    let cloning: Promise<WorkerClone> | null = null;
    /** The snapshot recorded as under way; committed once READY, given up if the start ends before. */
    let snapshotting: Promise<SnapshotInProgress | null> | null = null;
    let ready = false;
    try {
      // Before any stage is entered: the status the task was left in by the attempt before this one.
      const freshName = await startOverIfRepositoryCodeRan(ctx, task.status);
      const sandbox = await stage(
        "WAITING_FOR_SANDBOX",
        async () => {
          // A start taken over or retried never begins from a snapshot: its own sandbox may exist already.
          const made = await acquireSandboxForStart(
            ctx,
            task.status === "WORKING" || !!freshName,
            (image) => acquireSandbox(ctx, freshName, image),
            (plan) => {
              cloning = beginClone(ctx, plan);
            },
          );
          snapshot = made.snapshot;
          return made.sandbox;
        },
        {
          // The fence: a sandbox of this attempt's own name (a fresh one) goes with the attempt; the
          // task's own name is the next attempt's to adopt.
          overlap: async (made) => {
            if (freshName && made.name === freshName) await deps.sandboxes.destroy(made.ref);
          },
        },
      );
      if (task.kind === "sandbox") {
        await finishSandboxStart(ctx, current as { stage: StartTaskStatus; started: number } | null);
        return;
      }
      // A stage known to do nothing here is not written on its own: the next write carries it. A start
      // from a snapshot has its tree cloned and set up, and (when recorded) its hooks and skills known.
      const hit = (snapshot as SnapshotPlan | null)?.hit ?? null;
      const recorded = recordedStageResults(ctx, snapshot);
      const emptyReady = { skipWrite: !task.request.selected_repository?.trim() && !!sandbox.emptyWorkspaceReady };
      const workspace = await stage(
        "PREPARING_REPOSITORY",
        () => prepareRepository(ctx, sandbox, snapshot, cloning),
        hit ? { passed: fromSnapshotDetail.repository(hit.commit) } : emptyReady,
      );
      const setup = await stage(
        "RUNNING_SETUP_SCRIPT",
        () => runSetupScript(ctx, sandbox, workspace),
        workspace.fromSnapshot
          ? { passed: fromSnapshotDetail.setupScript() }
          : { skipWrite: !setupScriptMayRun(workspace) },
      );
      // Recorded beside the stages after it, before the conversation exists: every call of the agent's
      // into the sandbox waits for its commit, which comes after READY (snapshot-guard.ts).
      snapshotting = snapshot && setup.ran ? beginSnapshot(ctx, snapshot, sandbox, workspace) : null;
      const hooks = await stage(
        "SETTING_UP_GIT_HOOKS",
        async () => recorded?.hooks ?? setUpGitHooks(ctx, sandbox, workspace),
        recorded
          ? { passed: fromSnapshotDetail.hooks(recorded.hooks) }
          : { skipWrite: !workspace.repository || workspace.hasPreCommitScript === false },
      );
      const skills = await stage(
        "SETTING_UP_SKILLS",
        async () => recorded?.skills ?? setUpSkills(ctx, sandbox, workspace),
        recorded
          ? { passed: fromSnapshotDetail.skills(recorded.skills) }
          : { skipWrite: !workspace.repository || workspace.hasSkills === false },
      );
      const committing = await snapshotting;
      const conversation = await stage("STARTING_CONVERSATION", () =>
        openStartedConversation(ctx, sandbox, workspace, skills, hooks),
      );
      const finished = finish();
      // READY, the delivery of the messages queued for the task and the first run commit together:
      // a sender sees the queue or READY (queuePendingMessage takes the same row lock), and the run
      // for the initial message and those delivered is owed from then on, whatever Redis keeps.
      const readied = await deps.db.transaction().execute(async (trx) => {
        if (!(await startTasksRepository(trx).markReady(task.id, attempt, conversation.id, finished))) return null;
        const delivered = await deliverPendingMessages(trx, task.id, conversation.id);
        const asked = !!task.request.initial_message || delivered > 0;
        // The run's id is the conversation's own: one first run, however often READY is tried.
        const run = asked ? await requestRun(trx, conversation.id, deps.engineId, conversation.id) : null;
        return { delivered, run };
      });
      if (readied === null) throw new LostOwnership(task.id);
      metrics.startOutcomes.inc({ path: "queued", status: "READY", error_stage: "" });
      metrics.timeToReady.observe({ path: "queued" }, (Date.now() - Date.parse(task.createdAt)) / 1000);
      if (readied.delivered > 0) {
        log.info({ conversation_id: conversation.id, delivered: readied.delivered }, "pending messages delivered");
      }
      if (readied.run) await enqueueRun({ ...deps, logger: log }, readied.run);
      log.info({ conversation_id: conversation.id, stage_ms: finished?.ms }, "start task ready");
      // The job ends with the commit (a shutdown's grace waits for it; a worker that dies leaves it to
      // the agent's first call, which gives it up once overdue).
      ready = true;
      // The snapshot keeps what its hook and skill stages produced: a start from it runs neither.
      await committing?.commit(stageResultsOf(ctx, hooks, skills));
      if (hit && !hit.stageResults) {
        // A snapshot taken before results were kept: they are now, for its next starts.
        await repoSnapshotsRepository(deps.db)
          .recordStageResults(hit.id, stageResultsOf(ctx, hooks, skills))
          .catch((err: unknown) => log.warn({ err }, "the snapshot's stage results not recorded"));
      }
    } catch (err) {
      if (err instanceof LostOwnership) {
        log.warn("lost the start task to another attempt; stopping");
        return;
      }
      const at = (current as { stage: StartTaskStatus } | null)?.stage ?? "WORKING";
      if (isPermanentFault(err)) {
        // The user's to fix: no retry. The container goes first, so a task seen in ERROR has none left.
        const detail = `${at}: ${err.message}`;
        // Only the attempt that owns the task may remove its container (a newer one may be using it).
        const now = await tasks.get(task.id);
        if (now?.attempt !== attempt || isTerminalStartTaskStatus(now.status)) {
          log.warn("lost the start task to another attempt; stopping");
          return;
        }
        await releaseTaskSandbox(deps, task.id);
        await tasks.markError(task.id, detail, attempt);
        metrics.startOutcomes.inc({ path: "queued", status: "ERROR", error_stage: at });
        log.info({ detail }, "start task failed");
        throw new UnrecoverableError(detail);
      }
      log.warn({ stage: at, err, attempts_made: job.attemptsMade }, "start stage failed; will retry");
      throw err;
    } finally {
      // A clone never handed over (the start ended before) leaves nothing on the worker.
      (cloning as Promise<WorkerClone> | null)?.then((c) => c.discard()).catch(() => undefined);
      if (!ready) await (snapshotting as Promise<SnapshotInProgress | null> | null)?.then((s) => s?.abandon());
    }
  };
};

/**
 * A sandbox's own start (POST /api/v1/sandboxes) ends READY once its sandbox runs: no repository,
 * no conversation. Its SandboxInfo reads RUNNING from then on.
 */
const finishSandboxStart = async (ctx: StartContext, last: { stage: StartTaskStatus; started: number } | null) => {
  const finished = last ? { stage: last.stage, ms: Date.now() - last.started } : undefined;
  if (!(await startTasksRepository(ctx.deps.db).markReady(ctx.task.id, ctx.attempt, null, finished))) {
    throw new LostOwnership(ctx.task.id);
  }
  if (finished) metrics.startStageDuration.observe({ path: "queued", stage: finished.stage }, finished.ms / 1000);
  metrics.startOutcomes.inc({ path: "queued", status: "READY", error_stage: "" });
  ctx.log.info({ stage_ms: finished?.ms }, "sandbox start ready");
};

/**
 * After BullMQ gave up on a start job (a user error, or attempts spent): the task ends in ERROR,
 * never in a working state, and its container is removed. Idempotent.
 */
export const finishFailedStart = async (deps: WorkerDeps, taskId: string, reason: string): Promise<void> => {
  const tasks = startTasksRepository(deps.db);
  const task = await tasks.get(taskId);
  if (!task || task.status === "READY") return;
  // The container first, so a task seen in ERROR has none left; if Docker is down now, the
  // janitor removes it later (the task is ERROR either way).
  await releaseTaskSandbox(deps, taskId).catch((err) =>
    deps.logger.warn({ task_id: taskId, err }, "sandbox removal failed"),
  );
  if (task.status !== "ERROR" && (await tasks.markError(taskId, `${task.status}: ${reason}`))) {
    metrics.startOutcomes.inc({ path: "queued", status: "ERROR", error_stage: task.status });
  }
};

/** The 'failed' listener of the start worker: acts only when the job will not run again. */
export const onStartJobFailed = async (
  deps: WorkerDeps,
  job: Job<JobPayload<"conversation.start">> | undefined,
  err: Error,
): Promise<void> => {
  if (!job) return;
  const spent = err instanceof UnrecoverableError || err.name === "UnrecoverableError";
  const exhausted = job.attemptsMade >= (job.opts.attempts ?? 1);
  if (!spent && !exhausted) return;
  if (!spent) deps.logger.error({ task_id: job.data.taskId, err }, "start job gave up");
  await finishFailedStart(
    deps,
    job.data.taskId,
    `the sandbox could not be prepared (a temporary fault persisted through ${job.attemptsMade} attempts); try again later`,
  );
};
