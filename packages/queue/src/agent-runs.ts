import { randomUUID } from "node:crypto";
import { agentRunJobOptions, type Queues } from "./queues.ts";

/** Asks for one run of the agent loop on a conversation; the agent-run processor decides what it does. */
export const enqueueAgentRun = async (queues: Pick<Queues, "agentRun">, conversationId: string): Promise<string> => {
  const runId = randomUUID();
  await queues.agentRun.add(
    "run",
    { conversationId, runId },
    { ...agentRunJobOptions, jobId: `run-${conversationId}-${runId}` },
  );
  return runId;
};
