import type { Queues } from "./queues.ts";

/** The BullMQ job id of a run (enqueueAgentRun). */
export const agentRunJobId = (conversationId: string, runId: string): string => `run-${conversationId}-${runId}`;

/**
 * Whether the job of a run can still make progress: waiting, active (maybe stalled, about to be
 * taken over) or delayed (a retry's backoff). A failed, completed or vanished job cannot, so a run
 * lock it still holds is stale.
 */
export const isAgentRunJobAlive = async (
  queues: Pick<Queues, "agentRun">,
  conversationId: string,
  runId: string,
): Promise<boolean> => {
  const state = await queues.agentRun.getJobState(agentRunJobId(conversationId, runId));
  return (
    state === "waiting" ||
    state === "active" ||
    state === "delayed" ||
    state === "prioritized" ||
    state === "waiting-children"
  );
};
