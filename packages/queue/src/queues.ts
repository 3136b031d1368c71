import { randomUUID } from "node:crypto";
import { injectTraceContext } from "@tern/core";
import { Job, type JobsOptions, Queue, type QueueEvents, type QueueOptions } from "bullmq";
import type { Redis } from "ioredis";
import { agentRunJobId, type JobName, type JobPayload, jobs, QueueName, queueNameFor } from "./catalog.ts";

/** One engine's own queues (catalog.ts, `engineQueues`). */
export interface EngineQueues {
  agentRun: Queue;
  sandbox: Queue;
  janitor: Queue;
}

export interface Queues extends EngineQueues {
  start: Queue;
  webhook: Queue;
  /** The shared queues. */
  all: Queue[];
  /**
   * The queues of the engine `engineId` (made on first use, then kept); null: the shared ones, for
   * sandboxes without affinity.
   */
  forEngine: (engineId: string | null) => EngineQueues;
  close: () => Promise<void>;
}

const queueKey = {
  [QueueName.ConversationStart]: "start",
  [QueueName.AgentRun]: "agentRun",
  [QueueName.Sandbox]: "sandbox",
  [QueueName.Janitor]: "janitor",
  [QueueName.Webhook]: "webhook",
} as const satisfies Record<QueueName, keyof Queues>;

/** The queue a job goes to: for a job on a sandbox with affinity, its engine's. */
export const queueOf = (queues: Queues, name: JobName, engineId: string | null = null): Queue => {
  const key = queueKey[jobs[name].queue];
  return key === "agentRun" || key === "sandbox" || key === "janitor" ? queues.forEngine(engineId)[key] : queues[key];
};

export const createQueues = (connection: Redis, prefix: string): Queues => {
  const opts: QueueOptions = {
    connection,
    prefix,
    defaultJobOptions: { removeOnComplete: { age: 3_600, count: 1_000 }, removeOnFail: { age: 86_400 } },
  };
  const start = new Queue(QueueName.ConversationStart, opts);
  const agentRun = new Queue(QueueName.AgentRun, opts);
  const sandbox = new Queue(QueueName.Sandbox, opts);
  const janitor = new Queue(QueueName.Janitor, opts);
  const webhook = new Queue(QueueName.Webhook, opts);
  const all = [start, agentRun, sandbox, janitor, webhook];
  const shared: EngineQueues = { agentRun, sandbox, janitor };
  const engines = new Map<string, EngineQueues>();
  const forEngine = (engineId: string | null): EngineQueues => {
    if (!engineId) return shared;
    let found = engines.get(engineId);
    if (!found) {
      found = {
        agentRun: new Queue(queueNameFor(QueueName.AgentRun, engineId), opts),
        sandbox: new Queue(queueNameFor(QueueName.Sandbox, engineId), opts),
        janitor: new Queue(queueNameFor(QueueName.Janitor, engineId), opts),
      };
      engines.set(engineId, found);
    }
    return found;
  };
  return {
    start,
    agentRun,
    sandbox,
    janitor,
    webhook,
    all,
    forEngine,
    close: async () => {
      const engineQueues = [...engines.values()].flatMap((e) => [e.agentRun, e.sandbox, e.janitor]);
      await Promise.all([...all, ...engineQueues].map((q) => q.close()));
    },
  };
};

/** Where a job's data carries the trace context of whoever added it (the worker's span continues it). */
export const TRACE_CONTEXT_KEY = "_trace";

/**
 * The trace context rides beside the payload: the payload schemas strip unknown keys, so the
 * processor never sees it, and a job added without tracing on carries nothing.
 */
const withTraceContext = <D extends object>(data: D): D => {
  const carrier = injectTraceContext();
  return Object.keys(carrier).length > 0 ? { ...data, [TRACE_CONTEXT_KEY]: carrier } : data;
};

/**
 * The one way to add a job: its queue, options and id come from the catalog, and the payload is
 * checked against the job's schema before it reaches Redis. Returns the job id.
 */
export const enqueue = async <N extends JobName>(
  queues: Queues,
  name: N,
  payload: JobPayload<N>,
  opts: Pick<JobsOptions, "delay" | "jobId"> & {
    /** The engine of the sandbox the job is about (its queue); null or absent: the shared queue. */
    engineId?: string | null;
  } = {},
): Promise<string> => {
  const spec = jobs[name];
  const data = withTraceContext(spec.payload.parse(payload));
  const { engineId = null, ...jobOpts } = opts;
  const jobId = jobOpts.jobId ?? (spec.jobId as ((p: JobPayload<N>) => string) | undefined)?.(payload);
  const job = await queueOf(queues, name, engineId).add(name, data, {
    ...spec.options,
    ...jobOpts,
    ...(jobId ? { jobId } : {}),
  });
  return job.id ?? jobId ?? "";
};

/** The id of an existing job of the catalog, or undefined when Redis has none (lost or removed). */
export const findJob = async <N extends JobName>(queues: Queues, name: N, jobId: string) =>
  queueOf(queues, name).getJob(jobId);

/**
 * Asks for one run of the agent loop on a conversation. A caller that may ask twice for the same
 * run passes a stable `runId` (the job id is derived from it, so BullMQ keeps one job).
 */
export const enqueueAgentRun = async (
  queues: Queues,
  conversationId: string,
  runId: string = randomUUID(),
  /** The engine of the conversation's sandbox: the run goes to its queue. */
  engineId: string | null = null,
): Promise<string> => {
  await enqueue(queues, "agent.run", { conversationId, runId }, { engineId });
  return runId;
};

/** Where a run's job may be: its engine's queue, then the shared one (it was routed from there). */
const runQueues = (queues: Queues, engineId: string | null): Queue[] =>
  engineId ? [queues.forEngine(engineId).agentRun, queues.agentRun] : [queues.agentRun];

/**
 * The job of a run, from the first of its queues where it is in a state `wanted` accepts; null
 * when it is in none.
 */
const runJobIn = async (
  queues: Queues,
  conversationId: string,
  runId: string,
  engineId: string | null,
  wanted: (state: string) => boolean,
): Promise<Job | null> => {
  for (const queue of runQueues(queues, engineId)) {
    const job = await queue.getJob(agentRunJobId(conversationId, runId));
    if (job && wanted(await job.getState())) return job;
  }
  return null;
};

/**
 * The job of a run as Redis holds it: its state and the job, from the first of its queues that has
 * it; "missing" when none does (lost with Redis' data, or never added).
 */
export const agentRunJob = async (
  queues: Queues,
  run: { conversationId: string; runId: string; engineId: string | null },
): Promise<{ state: string; job: Job | null }> => {
  const job = await runJobIn(queues, run.conversationId, run.runId, run.engineId, (s) => s !== "unknown");
  return job ? { state: await job.getState(), job } : { state: "missing", job: null };
};

/** A job waited for by `enqueueAndWait` did not finish in time (it may still finish later). */
export class JobWaitTimeoutError extends Error {
  constructor(name: string, ms: number) {
    super(`${name} did not finish within ${ms} ms`);
    this.name = "JobWaitTimeoutError";
  }
}

/**
 * Adds a job of the catalog and waits for its processor's result, through `events` (a
 * QueueEvents of the job's queue): for commands a caller answers only once they took effect. A job
 * that failed for good rejects with its failure; one still going after `timeoutMs` rejects with
 * JobWaitTimeoutError.
 */
export const enqueueAndWait = async <N extends JobName>(
  queues: Queues,
  events: QueueEvents,
  name: N,
  payload: JobPayload<N>,
  timeoutMs: number,
  /** The engine of the sandbox: the job goes to its queue, and its result is read from there. */
  engineId: string | null = null,
): Promise<unknown> => {
  const spec = jobs[name];
  const data = withTraceContext(spec.payload.parse(payload));
  const queue = queueOf(queues, name, engineId);
  const job = await queue.add(name, data, spec.options);
  // `events` hears the shared queue only; an engine's queue is read back by the job's state. A
  // command waits while no worker of its engine is alive, and takes effect once one is back.
  if (queue.name !== queueOf(queues, name).name) return waitByPolling(queue, job.id ?? "", name, timeoutMs);
  try {
    return await job.waitUntilFinished(events, timeoutMs);
  } catch (err) {
    if (err instanceof Error && /timed out before finishing/.test(err.message)) {
      throw new JobWaitTimeoutError(name, timeoutMs);
    }
    throw err;
  }
};

const POLL_MS = 50;

/** The result of a job of `queue`, read back by its state until it finished or `timeoutMs` passed. */
const waitByPolling = async (queue: Queue, jobId: string, name: string, timeoutMs: number): Promise<unknown> => {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    // The state first, then the job: a job read while active and seen completed a moment later
    // would answer with the result it did not have yet (null).
    const state = await queue.getJobState(jobId);
    const job = await Job.fromId(queue, jobId);
    if (job && state === "completed") return job.returnvalue;
    if (job && state === "failed") throw new Error(job.failedReason || `${name} failed`);
    // Removed on completion (removeOnComplete) before it was seen: it ran, but its answer is gone.
    if (!job) throw new Error(`${name} job ${jobId} vanished before its result was read`);
    if (Date.now() >= deadline) throw new JobWaitTimeoutError(name, timeoutMs);
    await new Promise((r) => setTimeout(r, POLL_MS));
  }
};

/**
 * A run that waits (delayed) for its sandbox to be resumed continues now rather than at its next
 * look. False when the run's job is not waiting in the delayed set (running, or gone).
 */
export const promoteAgentRun = async (
  queues: Queues,
  conversationId: string,
  runId: string,
  engineId: string | null = null,
): Promise<boolean> => {
  const job = await runJobIn(queues, conversationId, runId, engineId, (s) => s === "delayed");
  if (!job) return false;
  try {
    await job.promote();
    return true;
  } catch {
    // It left the delayed set in between (its own look came first): nothing to hurry.
    return false;
  }
};
