import { sandboxStatuses } from "@tern/core";
import type { JobsOptions } from "bullmq";
import { z } from "zod";

/**
 * The job catalog, keyed by job: each job names its queue, the schema of its payload (checked
 * when a worker takes the job) and its options. Producers go through `enqueue` (queues.ts), so a
 * job can only be added with the payload its processor expects.
 */
export const QueueName = {
  /** Start tasks: one job per task, jobId = task id. */
  ConversationStart: "conversation-start",
  /** Runs of the agent loop: one job per run. */
  AgentRun: "agent-run",
  /** Commands that change one sandbox: pause, resume, removal. */
  Sandbox: "sandbox",
  /** The sweep of orphan containers, stuck tasks and lost jobs. */
  Janitor: "janitor",
  /** Webhook deliveries out of the outbox (webhook_deliveries): one job per try of a delivery. */
  Webhook: "webhook",
} as const;

export type QueueName = (typeof QueueName)[keyof typeof QueueName];

/**
 * Queues whose jobs need one sandbox, or one engine's containers: on a driver with affinity (each
 * engine reached only by its own workers, as Docker's), each engine has its own such queue,
 * `<queue>@<engine id>`, consumed only by that engine's workers. Starts stay on the shared queue:
 * any worker with capacity takes one and makes the sandbox on its own engine.
 */
export const engineQueues = [QueueName.AgentRun, QueueName.Sandbox, QueueName.Janitor] as const;
export type EngineQueueName = (typeof engineQueues)[number];

export const isEngineQueue = (queue: QueueName): queue is EngineQueueName =>
  (engineQueues as readonly QueueName[]).includes(queue);

/** The BullMQ name of `queue` for the engine `engineId`; null (no affinity): the shared queue. */
export const queueNameFor = (queue: QueueName, engineId: string | null): string =>
  engineId && isEngineQueue(queue) ? `${queue}@${engineId}` : queue;

/** The catalog's queue of a BullMQ queue name (`agent-run@engine` is the agent-run queue). */
export const baseQueueOf = (bullName: string): QueueName => bullName.split("@")[0] as QueueName;

const id = z.uuid();

const retried = (delay: number): JobsOptions => ({ attempts: 5, backoff: { type: "exponential", delay } });

export const jobs = {
  "conversation.start": {
    queue: QueueName.ConversationStart,
    payload: z.object({
      taskId: id,
      /** Set by the reconciler when it re-creates a lost job: attempts of the new job count on from here. */
      attemptBase: z.number().int().nonnegative().optional(),
    }),
    options: retried(500),
    /** One job per task: a second add of the same task is a no-op. */
    jobId: (p: { taskId: string }): string => p.taskId,
  },
  "agent.run": {
    queue: QueueName.AgentRun,
    payload: z.object({ conversationId: id, runId: id }),
    options: retried(1_000),
    /** A caller that may ask twice for the same run passes the same runId: BullMQ keeps one job. */
    jobId: (p: { conversationId: string; runId: string }): string => agentRunJobId(p.conversationId, p.runId),
  },
  "sandbox.remove": {
    queue: QueueName.Sandbox,
    /** By sandbox (DELETE /sandboxes/{id}) or by conversation (DELETE /app-conversations/{id}). */
    payload: z.union([z.object({ sandboxId: id }), z.object({ conversationId: id })]),
    options: retried(1_000),
    // No fixed id: removal is idempotent, and a DELETE repeated after a failed removal gets a fresh job.
    jobId: undefined,
  },
  /**
   * Freezes the sandbox (its processes stop where they are); the agent run of its conversation
   * waits until it is resumed. The API waits for the job and answers with its result.
   */
  "sandbox.pause": {
    queue: QueueName.Sandbox,
    payload: z.object({ sandboxId: id }),
    options: retried(500),
    // No fixed id: each request is its own command; the worker runs commands on one sandbox one at a time.
    jobId: undefined,
  },
  /** Thaws the sandbox; a run that waited for it continues at once. */
  "sandbox.resume": {
    queue: QueueName.Sandbox,
    payload: z.object({ sandboxId: id }),
    options: retried(500),
    jobId: undefined,
  },
  /**
   * One try of a webhook delivery. The outbox row is the truth (status, attempts, next try); the
   * job only carries the work, so a job lost with Redis or a worker is made again by the outbox
   * sweep. Retries are the row's (exponential backoff for WEBHOOK_RETRY_WINDOW_MS), not BullMQ's.
   */
  "webhook.deliver": {
    queue: QueueName.Webhook,
    payload: z.object({ deliveryId: id, attempt: z.number().int().nonnegative() }),
    options: {
      attempts: 3,
      backoff: { type: "exponential", delay: 1_000 },
      removeOnComplete: true,
      removeOnFail: true,
    },
    /** One job per try of a delivery: the sweep may ask again while the job waits, BullMQ keeps one. */
    jobId: (p: { deliveryId: string; attempt: number }): string => `wh-${p.deliveryId}-${p.attempt}`,
  },
  "janitor.sweep": {
    queue: QueueName.Janitor,
    payload: z.object({}),
    options: { removeOnComplete: true, removeOnFail: 100 },
    jobId: undefined,
  },
} as const satisfies Record<
  string,
  {
    queue: QueueName;
    payload: z.ZodType;
    options: JobsOptions;
    jobId: ((payload: never) => string) | undefined;
  }
>;

/**
 * What a sandbox command's processor returns, and the API reads back (enqueueAndWait): done with
 * the sandbox's status now, or refused for the reason the sandbox's state gives. A refusal is a
 * result, not a failure: retrying would not change it.
 */
export const sandboxCommandResultSchema = z.discriminatedUnion("outcome", [
  z.object({ outcome: z.literal("done"), status: z.enum(sandboxStatuses) }),
  /** Removed, or its start failed: nothing left to pause or resume. */
  z.object({ outcome: z.literal("gone") }),
  /** Its start is still going on (the start pipeline is using it). */
  z.object({ outcome: z.literal("starting") }),
  /** No such sandbox. */
  z.object({ outcome: z.literal("missing") }),
]);

export type SandboxCommandResult = z.infer<typeof sandboxCommandResultSchema>;

export type JobName = keyof typeof jobs;
export type JobPayload<N extends JobName> = z.infer<(typeof jobs)[N]["payload"]>;

/** The jobs a queue carries. */
export type JobsOf<Q extends QueueName> = {
  [N in JobName]: (typeof jobs)[N]["queue"] extends Q ? N : never;
}[JobName];

export const jobNamesOf = (queue: QueueName): JobName[] =>
  (Object.keys(jobs) as JobName[]).filter((n) => jobs[n].queue === queue);

export const isJobName = (name: string): name is JobName => Object.hasOwn(jobs, name);

/** The BullMQ job id of an agent run. */
export const agentRunJobId = (conversationId: string, runId: string): string => `run-${conversationId}-${runId}`;

/** Parses a job's payload as its processor expects it; throws (with the field) when it does not fit. */
export const parseJobPayload = <N extends JobName>(name: N, data: unknown): JobPayload<N> =>
  jobs[name].payload.parse(data) as JobPayload<N>;
