import type { AgentRunJob } from "@tern/queue";
import type { Job } from "bullmq";
import type { WorkerDeps } from "../deps.ts";

/** Runs the agent loop for one conversation (packages/agent). Replaced by the agent runtime (issue 5). */
export const agentRunProcessor =
  (deps: WorkerDeps) =>
  async (job: Job<AgentRunJob>): Promise<void> => {
    deps.logger.warn({ conversation_id: job.data.conversationId }, "agent runtime not wired yet");
  };
