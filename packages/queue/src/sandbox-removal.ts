import type { Queues } from "./queues.ts";

/**
 * Job name, on the agent-run queue, of a request to stop and remove a conversation's sandbox
 * (DELETE /api/v1/app-conversations/{id}). It rides the agent-run queue because the agent-run
 * processor owns the conversation's container while the agent works in it; `runId` is unused.
 */
export const removeSandboxJobName = "remove-sandbox";

/** Idempotent: one removal job per conversation at a time (the job id is derived from it). */
export const enqueueSandboxRemoval = async (
  queues: Pick<Queues, "agentRun">,
  conversationId: string,
): Promise<void> => {
  await queues.agentRun.add(
    removeSandboxJobName,
    { conversationId, runId: conversationId },
    { attempts: 5, backoff: { type: "exponential", delay: 1_000 }, jobId: `remove-sandbox-${conversationId}` },
  );
};
