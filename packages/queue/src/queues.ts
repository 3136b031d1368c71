import { Queue, type QueueOptions } from "bullmq";
import type { Redis } from "ioredis";
import { type JobPayloads, QueueName } from "./catalog.ts";

export type TypedQueue<N extends QueueName> = Queue<JobPayloads[N], unknown, string>;

export interface Queues {
  start: TypedQueue<typeof QueueName.ConversationStart>;
  agentRun: TypedQueue<typeof QueueName.AgentRun>;
  janitor: TypedQueue<typeof QueueName.Janitor>;
  all: Queue[];
  close: () => Promise<void>;
}

/** Retries with backoff for passing faults; a user's error fails the job at once (UnrecoverableError). */
export const startJobOptions = { attempts: 5, backoff: { type: "exponential", delay: 500 } } as const;
export const agentRunJobOptions = { attempts: 5, backoff: { type: "exponential", delay: 1_000 } } as const;

export const createQueues = (connection: Redis, prefix: string): Queues => {
  const opts: QueueOptions = {
    connection,
    prefix,
    defaultJobOptions: { removeOnComplete: { age: 3_600, count: 1_000 }, removeOnFail: { age: 86_400 } },
  };
  const start = new Queue(QueueName.ConversationStart, opts) as Queues["start"];
  const agentRun = new Queue(QueueName.AgentRun, opts) as Queues["agentRun"];
  const janitor = new Queue(QueueName.Janitor, opts) as Queues["janitor"];
  const all = [start, agentRun, janitor] as Queue[];
  return { start, agentRun, janitor, all, close: async () => void (await Promise.all(all.map((q) => q.close()))) };
};
