import { abandonRun, runAgent } from "@tern/agent";
import { type AgentRunJob, isAgentRunJobAlive, removeSandboxJobName } from "@tern/queue";
import { DelayedError, type Job } from "bullmq";
import { removeConversationSandbox } from "../agent/remove-sandbox.ts";
import type { WorkerDeps } from "../deps.ts";

/** How long a run waits before it looks again when another run holds its conversation. */
const busyRetryMs = 1_000;

/**
 * One run of the agent loop on a conversation (packages/agent), or the removal of its sandbox.
 * A run whose conversation is held by another run waits (the job is delayed, not dropped), so a
 * follow-up message sent during a run is answered after it. Passing faults (Postgres, Docker)
 * throw and BullMQ retries the job; the retry resumes the run from its events. When the last
 * attempt fails, the conversation ends in `error` instead of staying `running`.
 */
export const agentRunProcessor =
  (deps: WorkerDeps) =>
  async (job: Job<AgentRunJob>, token?: string): Promise<void> => {
    const { conversationId, runId } = job.data;
    const logger = deps.logger.child({ conversation_id: conversationId, job_id: job.id });
    if (job.name === removeSandboxJobName) {
      await removeConversationSandbox({ db: deps.db, sandboxes: deps.sandboxes, logger }, conversationId);
      return;
    }
    try {
      const run = () =>
        runAgent({ db: deps.db, sandboxes: deps.sandboxes, settings: deps.config, logger }, conversationId, runId);
      let outcome = await run();
      if (outcome.outcome === "busy" && !(await isAgentRunJobAlive(deps.queues, conversationId, outcome.activeRunId))) {
        // The lock's holder has no job that could finish it (given up after stalling, or lost with
        // Redis): end that run in error, so the conversation is not blocked for ever.
        const stale = outcome.activeRunId;
        if (await abandonRun(deps.db, conversationId, stale, "its job was lost before it ended")) {
          logger.warn({ stale_run_id: stale }, "ended a run whose job was lost");
        }
        outcome = await run();
      }
      if (outcome.outcome === "busy") {
        await job.moveToDelayed(Date.now() + busyRetryMs, token);
        throw new DelayedError();
      }
      if (outcome.outcome === "skipped") logger.info({ reason: outcome.reason }, "agent run skipped");
    } catch (err) {
      if (err instanceof DelayedError) throw err;
      const lastAttempt = job.attemptsMade + 1 >= (job.opts.attempts ?? 1);
      logger.error({ err, attempt: job.attemptsMade + 1, last: lastAttempt }, "agent run failed");
      if (lastAttempt) {
        await abandonRun(deps.db, conversationId, runId, err instanceof Error ? err.message : String(err));
      }
      throw err;
    }
  };
