/** Every queue of the service, with the payload its jobs carry. Processors are idempotent. */
export const QueueName = {
  /** One job per start task; jobId = task id. */
  ConversationStart: "conversation-start",
  /** One job per run of the agent loop; jobId = `${conversationId}:${runId}`. */
  AgentRun: "agent-run",
  /** Repeatable: orphan containers, stuck tasks, tasks that lost their job. */
  Janitor: "janitor",
} as const;

export type QueueName = (typeof QueueName)[keyof typeof QueueName];

export interface ConversationStartJob {
  taskId: string;
  /** Set by the reconciler when it re-creates a lost job: attempts of the new job count on from here. */
  attemptBase?: number;
}

export interface AgentRunJob {
  conversationId: string;
  runId: string;
}

export type JanitorJob = Record<string, never>;

export interface JobPayloads {
  [QueueName.ConversationStart]: ConversationStartJob;
  [QueueName.AgentRun]: AgentRunJob;
  [QueueName.Janitor]: JanitorJob;
}

export const allQueueNames: QueueName[] = Object.values(QueueName);
