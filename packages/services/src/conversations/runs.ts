import { withTimeout } from "@tern/core";
import { agentRunsRepository, type Database, type RequestedRun } from "@tern/db";
import { enqueueAgentRun } from "@tern/queue";
import type { Kysely } from "kysely";
import type { QueueDeps } from "../deps.ts";

/**
 * Asks for a run of the agent on a conversation, in `db`'s transaction: the one that writes what
 * asks for it (a follow-up's message, an answer to a confirmation, a start's first message), so
 * the two commit together. From the commit on the run is owed, whatever Redis keeps: its job is a
 * copy, added by `enqueueRun` after the commit, and again by the janitor's sweep when lost.
 * `runId`: a request that may be made twice (a start's first run is the conversation's own id).
 */
export const requestRun = (
  db: Kysely<Database>,
  conversationId: string,
  engineId: string | null,
  runId?: string,
): Promise<RequestedRun> => agentRunsRepository(db).request({ conversationId, engineId, runId });

const DEFAULT_QUEUE_TIMEOUT_MS = 5_000;

/**
 * After the commit: the run's job, on its engine's queue, under an id derived from the run's (a
 * second add of it is a no-op). A job that cannot be added now (Redis down, slow or lost) is not
 * the caller's failure: the run is committed, and the janitor's sweep (reconcileRunJobs) adds its
 * job once it finds none. Never throws.
 */
export const enqueueRun = async (
  deps: Pick<QueueDeps, "queues" | "redis" | "logger" | "queueTimeoutMs">,
  run: RequestedRun,
): Promise<void> => {
  const context = { conversation_id: run.conversationId, run_id: run.runId };
  if (deps.redis.status !== "ready") {
    deps.logger.warn(context, "the job queue is down; the janitor adds the run's job");
    return;
  }
  const ms = deps.queueTimeoutMs ?? DEFAULT_QUEUE_TIMEOUT_MS;
  try {
    await withTimeout(
      enqueueAgentRun(deps.queues, run.conversationId, run.runId, run.engineId),
      ms,
      `the job queue gave no answer within ${ms} ms`,
    );
    deps.logger.info(context, "agent run requested");
  } catch (err) {
    deps.logger.warn({ err, ...context }, "the run's job could not be added; the janitor adds it");
  }
};
