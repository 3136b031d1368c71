import { QueueName } from "@tern/queue";
import { Worker } from "bullmq";
import type { WorkerDeps } from "./deps.ts";
import { agentRunProcessor } from "./processors/agent-run.ts";
import { conversationStartProcessor, onStartJobFailed } from "./processors/conversation-start.ts";
import { janitorProcessor } from "./processors/janitor.ts";

/** The one registry of this process's BullMQ workers: which processor serves which queue, and how. */
export const startWorkers = (deps: WorkerDeps): Worker[] => {
  const { config, logger } = deps;
  const common = {
    connection: deps.redis,
    prefix: config.REDIS_PREFIX,
    lockDuration: config.WORKER_LOCK_DURATION_MS,
    stalledInterval: config.WORKER_STALLED_INTERVAL_MS,
    maxStalledCount: 1,
  };

  const start = new Worker(QueueName.ConversationStart, conversationStartProcessor(deps), {
    ...common,
    concurrency: config.WORKER_CONCURRENCY,
  });
  start.on("failed", (job, err) => {
    onStartJobFailed(deps, job, err).catch((e) =>
      logger.error(
        { task_id: job?.data.taskId, err: e instanceof Error ? e.message : String(e) },
        "failed-start cleanup failed",
      ),
    );
  });

  const agentRun = new Worker(QueueName.AgentRun, agentRunProcessor(deps), {
    ...common,
    concurrency: config.WORKER_CONCURRENCY,
  });

  const janitor = new Worker(QueueName.Janitor, janitorProcessor(deps), { ...common, concurrency: 1 });

  const workers = [start, agentRun, janitor];
  for (const w of workers) {
    w.on("error", (err) => logger.warn({ queue: w.name, err: err.message }, "queue worker error"));
    w.on("stalled", (jobId) => logger.warn({ queue: w.name, job_id: jobId }, "job stalled; another attempt takes it"));
  }
  return workers;
};
