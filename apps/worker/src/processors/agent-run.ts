import { runAgent } from "@tern/agent";
import { agentRunsRepository } from "@tern/db";
import { DelayedError } from "bullmq";
import { agentRunContext } from "../agent/run-context.ts";
import { abandonRun, agentRunStore } from "../agent/run-store.ts";
import { ensureSandboxRunning } from "../agent/sandbox-idleness.ts";
import type { WorkerDeps } from "../deps.ts";
import { createGitTools } from "../git/tools.ts";
import { snapshotGuardedDriver } from "../sandbox/snapshot-guard.ts";
import { replaceDeadClaimedSandbox } from "../sandbox/warm-rows.ts";
import type { JobProcessor } from "./types.ts";

/** How long a run waits before it looks again when another run holds its conversation. */
const busyRetryMs = 1_000;
/**
 * How long a run whose sandbox is paused waits before it looks again. Resuming the sandbox
 * promotes the waiting job at once (processors/sandbox.ts); this is the fallback if that is missed.
 */
const pausedRetryMs = 5_000;

/**
 * `agent.run`: one run of the agent loop on a conversation (packages/agent). The run is a row in
 * Postgres, asked for before its job was added; the job, a copy, may come again (the janitor adds
 * it anew when Redis lost it): the run's lock and its fencing make a second delivery harmless.
 * A run whose conversation is held by another run waits (the job is delayed, not dropped), so a
 * follow-up message sent during a run is answered after it; so does a run whose sandbox is paused,
 * until it is resumed (then the same run continues). Passing faults (Postgres, Docker)
 * throw and BullMQ retries the job; the retry resumes the run from its events. When the last
 * attempt fails, the conversation ends in `error` instead of staying `running`.
 */
export const agentRunProcessor = (deps: WorkerDeps): JobProcessor<"agent.run"> => {
  // A sandbox whose snapshot is still being committed (its start answered READY before) is the
  // agent's once the commit returns.
  const sandboxes = snapshotGuardedDriver(deps.sandboxes, deps.db, { logger: deps.logger });
  // The run's reads and its lease (and with it, the sink its events leave through).
  const store = agentRunStore(deps.db);
  return async (job, token) => {
    const { conversationId, runId } = job.data;
    const logger = deps.logger.child({ conversation_id: conversationId, job_id: job.id });
    const interrupt = deps.runInterrupts?.track(conversationId);
    try {
      const run = () =>
        runAgent(
          {
            store,
            sandboxes,
            settings: deps.config,
            logger,
            runContext: (conversation) =>
              agentRunContext({ db: deps.db, secretBox: deps.secretBox, logger }, conversation),
            // git_push and create_pull_request: run here, with the user's token, never in the sandbox.
            git: createGitTools(deps),
            ensureSandboxRunning: async (conversation) => {
              await ensureSandboxRunning({ db: deps.db, sandboxes: deps.sandboxes, logger }, conversation);
              // A sandbox a start's transaction claimed from a row: this first exec proves it alive, or replaces it.
              await replaceDeadClaimedSandbox(deps, conversation, logger);
            },
            ...(interrupt ? { interrupt: interrupt.signal, pause: interrupt.pause } : {}),
            ...(deps.stopping ? { shutdown: deps.stopping } : {}),
          },
          conversationId,
          runId,
        );
      const runs = agentRunsRepository(deps.db);
      let outcome = await run();
      if (outcome.outcome === "busy" && !(await runs.isOpen(outcome.activeRunId))) {
        // The lock's holder is no run that is owed (no row, or one that ended): end it in error, so
        // the conversation is not blocked for ever. A holder whose job Redis lost is owed, and the
        // janitor adds its job again: this run waits for it.
        const stale = outcome.activeRunId;
        if (await abandonRun(deps.db, conversationId, stale, "its job was lost before it ended")) {
          logger.warn({ stale_run_id: stale }, "ended a run whose job was lost");
        }
        outcome = await run();
      }
      if (outcome.outcome === "busy" || outcome.outcome === "waiting") {
        // Delayed, not failed: no attempt is spent, and the job (so the run) stays alive.
        await job.moveToDelayed(Date.now() + (outcome.outcome === "busy" ? busyRetryMs : pausedRetryMs), token);
        throw new DelayedError();
      }
      if (outcome.outcome === "skipped") {
        // Nothing to answer, or the conversation waits for a confirmation: the run is no longer owed.
        await runs.skip(runId);
        logger.info({ reason: outcome.reason }, "agent run skipped");
      }
    } catch (err) {
      if (err instanceof DelayedError) throw err;
      // Stopped by the worker's shutdown: handed back (the job stalls and another worker resumes
      // the run), never abandoned on its last attempt.
      if (deps.stopping?.aborted) throw err;
      const lastAttempt = job.attemptsMade + 1 >= (job.opts.attempts ?? 1);
      logger.error({ err, attempt: job.attemptsMade + 1, last: lastAttempt }, "agent run failed");
      if (lastAttempt) {
        await abandonRun(deps.db, conversationId, runId, err instanceof Error ? err.message : String(err));
      }
      throw err;
    } finally {
      interrupt?.release();
    }
  };
};
