import type { Queues } from "./queues.ts";

/**
 * Job name, on the agent-run queue, of a request to stop and remove a conversation's sandbox
 * (DELETE /api/v1/app-conversations/{id}). It rides the agent-run queue because the agent-run
 * processor owns the conversation's container while the agent works in it; `runId` is unused.
 */
export const removeSandboxJobName = "remove-sandbox";

/**
 * Asks a worker to remove the sandbox. Removal is idempotent, so no job id is fixed: a DELETE
 * repeated after a failed removal (Docker down, attempts spent) gets a fresh job.
 */
export const enqueueSandboxRemoval = async (
  queues: Pick<Queues, "agentRun">,
  conversationId: string,
): Promise<void> => {
  await queues.agentRun.add(
    removeSandboxJobName,
    { conversationId, runId: conversationId },
    { attempts: 5, backoff: { type: "exponential", delay: 1_000 } },
  );
};
