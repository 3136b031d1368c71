import { randomUUID } from "node:crypto";
import { agentRunJobId } from "./agent-run-jobs.ts";
import { agentRunJobOptions, type Queues } from "./queues.ts";

/**
 * Asks for one run of the agent loop on a conversation; the agent-run processor decides what it
 * does. A caller that may ask twice for the same run passes a stable `runId`: the job id is
 * derived from it, so BullMQ keeps one job.
 */
export const enqueueAgentRun = async (
  queues: Pick<Queues, "agentRun">,
  conversationId: string,
  runId: string = randomUUID(),
): Promise<string> => {
  await queues.agentRun.add(
    "run",
    { conversationId, runId },
    { ...agentRunJobOptions, jobId: agentRunJobId(conversationId, runId) },
  );
  return runId;
};
