import { extractTraceContext, metrics, SpanKind, withSpan } from "@tern/core";
import { conversationsRepository, sandboxesRepository } from "@tern/db";
import {
  baseQueueOf,
  enqueue,
  isEngineQueue,
  isJobName,
  type JobName,
  type JobPayload,
  jobNamesOf,
  jobs,
  QueueName,
  queueNameFor,
  TRACE_CONTEXT_KEY,
} from "@tern/queue";
import { type Job, UnrecoverableError, Worker } from "bullmq";
import type { WorkerDeps } from "./deps.ts";
import { agentRunProcessor } from "./processors/agent-run.ts";
import { conversationStartProcessor, onStartJobFailed } from "./processors/conversation-start.ts";
import { janitorProcessor } from "./processors/janitor.ts";
import { sandboxPauseProcessor, sandboxRemoveProcessor, sandboxResumeProcessor } from "./processors/sandbox.ts";
import type { JobProcessor } from "./processors/types.ts";
import { webhookDeliverProcessor } from "./processors/webhooks.ts";

export type Registry = { [N in JobName]: JobProcessor<N> };

/** Names that jobs added before the catalog was keyed by job still carry in Redis. */
const legacyNames: Record<string, JobName> = {
  start: "conversation.start",
  run: "agent.run",
  "remove-sandbox": "sandbox.remove",
  sweep: "janitor.sweep",
};

/**
 * Affinity, on a driver with it: the engine a job must run on, and how it gets there. A job of
 * a sandbox on another engine (added to the shared queue before its sandbox was recorded, or by a
 * producer from before engines) is forwarded to that engine's queue rather than run here, where
 * its sandbox cannot be reached.
 */
export interface Placement {
  /** This worker's engine (null: no affinity). */
  engineId: string | null;
  /** The engine of the sandbox a job needs; null when it has none (anywhere will do) or needs none. */
  engineOf: (name: JobName, data: unknown) => Promise<string | null>;
  forward: (name: JobName, data: unknown, engineId: string) => Promise<void>;
}

/** What a forwarded job completes with on the queue it was taken from. */
interface Forwarded {
  forwardedTo: string;
}

/**
 * Routes each job of a queue to its processor, after checking its payload against the job's
 * schema: a job that does not fit fails at once (retrying cannot fix it). With `placement`, a job
 * of a sandbox held by another engine goes on to that engine's queue.
 */
export const dispatcher =
  (queue: QueueName, registry: Registry, placement?: Placement) =>
  async (job: Job, token?: string): Promise<unknown> => {
    const name = isJobName(job.name) ? job.name : legacyNames[job.name];
    if (!name || jobs[name].queue !== queue) {
      throw new UnrecoverableError(`no job '${job.name}' on the ${queue} queue`);
    }
    // Before the parse, which strips it: the context of whoever added the job (the API's request).
    const parent = extractTraceContext((job.data as Record<string, unknown> | undefined)?.[TRACE_CONTEXT_KEY]);
    const parsed = jobs[name].payload.safeParse(job.data);
    if (!parsed.success) {
      const issues = parsed.error.issues.map((i) => `${i.path.join(".") || "(payload)"}: ${i.message}`).join("; ");
      throw new UnrecoverableError(`invalid ${name} payload: ${issues}`);
    }
    job.data = parsed.data;
    if (placement) {
      const engineId = await placement.engineOf(name, parsed.data);
      if (engineId && engineId !== placement.engineId) {
        await placement.forward(name, parsed.data, engineId);
        return { forwardedTo: engineId } satisfies Forwarded;
      }
    }
    const taken = Date.now();
    // Waiting time: from when the job could run (enqueued, or its delay ended) to this attempt.
    const ready = job.timestamp + (job.delay ?? 0);
    const waited = (job.processedOn ?? taken) - ready;
    if (Number.isFinite(waited)) metrics.jobWait.observe({ queue, job: name }, Math.max(0, waited) / 1000);
    let outcome = "failed";
    try {
      const result = await withSpan(
        `job ${name}`,
        {
          "messaging.system": "bullmq",
          "messaging.destination.name": queue,
          "messaging.message.id": job.id ?? "",
          attempt: job.attemptsMade + 1,
        },
        () => (registry[name] as JobProcessor<JobName>)(job, token),
        { parent, kind: SpanKind.CONSUMER },
      );
      outcome = "completed";
      return result;
    } finally {
      metrics.jobProcessing.observe({ queue, job: name, outcome }, (Date.now() - taken) / 1000);
    }
  };

/** The engine recorded for the sandbox a job of an engine queue works on (null: none recorded). */
const sandboxEngineOf = async (deps: WorkerDeps, name: JobName, data: unknown): Promise<string | null> => {
  const sandboxes = sandboxesRepository(deps.db);
  const ofConversation = async (conversationId: string) => {
    const conversation = await conversationsRepository(deps.db).get(conversationId);
    return conversation?.sandboxId ? sandboxes.get(conversation.sandboxId) : null;
  };
  switch (name) {
    case "agent.run":
      return (await ofConversation((data as JobPayload<"agent.run">).conversationId))?.engineId ?? null;
    case "sandbox.remove":
    case "sandbox.pause":
    case "sandbox.resume": {
      const d = data as JobPayload<"sandbox.remove">;
      const row = "sandboxId" in d ? await sandboxes.get(d.sandboxId) : await ofConversation(d.conversationId);
      return row?.engineId ?? null;
    }
    default:
      // Starts make their sandbox where they run; a sweep's queue is its engine already.
      return null;
  }
};

/** The one registry of this process's BullMQ workers: which processor serves which job, and how. */
export const startWorkers = (deps: WorkerDeps): Worker[] => {
  const { config, logger } = deps;
  const registry: Registry = {
    "conversation.start": conversationStartProcessor(deps),
    "agent.run": agentRunProcessor(deps),
    "sandbox.remove": sandboxRemoveProcessor(deps),
    "sandbox.pause": sandboxPauseProcessor(deps),
    "sandbox.resume": sandboxResumeProcessor(deps),
    "janitor.sweep": janitorProcessor(deps),
    "webhook.deliver": webhookDeliverProcessor(deps),
  };
  const concurrency: Record<QueueName, number> = {
    [QueueName.ConversationStart]: config.WORKER_CONCURRENCY,
    [QueueName.AgentRun]: config.WORKER_CONCURRENCY,
    [QueueName.Sandbox]: config.WORKER_CONCURRENCY,
    [QueueName.Janitor]: 1,
    // Deliveries mostly wait on receivers, not on this machine.
    [QueueName.Webhook]: config.WORKER_CONCURRENCY * 4,
  };
  const placement: Placement = {
    engineId: deps.engineId,
    engineOf: (name, data) => sandboxEngineOf(deps, name, data),
    forward: async (name, data, engineId) => {
      await enqueue(deps.queues, name, data as JobPayload<typeof name>, { engineId });
      logger.info({ job: name, engine_id: engineId }, "job forwarded to the queue of its sandbox's engine");
    },
  };
  // The shared queues, and with affinity this engine's own: its sandboxes' runs and commands, and
  // its janitor. Shared jobs of a sandbox on another engine are forwarded there (the dispatcher).
  const queueNames: string[] = [
    ...Object.values(QueueName),
    ...(deps.engineId
      ? Object.values(QueueName)
          .filter(isEngineQueue)
          .map((q) => queueNameFor(q, deps.engineId))
      : []),
  ];
  const workers = queueNames.map((bullName) => {
    const queue = baseQueueOf(bullName);
    const own = bullName !== queue;
    // With affinity the shared run and command queues only hold jobs to forward (or of rows from
    // before engines were recorded): one at a time is enough there.
    const slots = deps.engineId && !own && isEngineQueue(queue) ? 1 : concurrency[queue];
    return new Worker(bullName, dispatcher(queue, registry, isEngineQueue(queue) ? placement : undefined), {
      // Stored on each job it takes (job.processedBy): which process ran a job is state, not a log line.
      name: config.WORKER_ID,
      connection: deps.redis,
      prefix: config.REDIS_PREFIX,
      lockDuration: config.WORKER_LOCK_DURATION_MS,
      stalledInterval: config.WORKER_STALLED_INTERVAL_MS,
      maxStalledCount: 1,
      concurrency: slots,
    });
  });

  for (const w of workers) {
    w.on("error", (err) => logger.warn({ queue: w.name, err }, "queue worker error"));
    w.on("stalled", (jobId) => logger.warn({ queue: w.name, job_id: jobId }, "job stalled; another attempt takes it"));
    if (jobNamesOf(baseQueueOf(w.name)).includes("conversation.start")) {
      w.on("failed", (job, err) => {
        onStartJobFailed(deps, job, err).catch((e) =>
          logger.error({ task_id: job?.data?.taskId, err: e }, "failed-start cleanup failed"),
        );
      });
    }
  }
  return workers;
};
