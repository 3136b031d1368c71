import type { WorkerDeps } from "../deps.ts";
import { destroySandbox, freezeSandbox, removeConversationSandbox, thawSandbox } from "../sandbox/commands.ts";
import type { JobProcessor } from "./types.ts";

/**
 * The `sandbox` queue: commands that change one sandbox. Each returns its result (done with the
 * new status, or the refusal), which the API waits for and answers with; see sandbox/commands.ts.
 */
const forJob = (deps: WorkerDeps, jobId: string | undefined, sandboxId?: string) => ({
  ...deps,
  logger: deps.logger.child({ job_id: jobId, ...(sandboxId ? { sandbox_id: sandboxId } : {}) }),
});

/** `sandbox.remove`: by sandbox, or the sandbox of a deleted conversation; idempotent. */
export const sandboxRemoveProcessor =
  (deps: WorkerDeps): JobProcessor<"sandbox.remove"> =>
  async (job) =>
    "sandboxId" in job.data
      ? destroySandbox(forJob(deps, job.id, job.data.sandboxId), job.data.sandboxId)
      : removeConversationSandbox(forJob(deps, job.id), job.data.conversationId);

/** `sandbox.pause`: freezes the sandbox; its conversation's run waits. */
export const sandboxPauseProcessor =
  (deps: WorkerDeps): JobProcessor<"sandbox.pause"> =>
  async (job) =>
    freezeSandbox(forJob(deps, job.id, job.data.sandboxId), job.data.sandboxId);

/** `sandbox.resume`: thaws the sandbox; the run that waited continues. */
export const sandboxResumeProcessor =
  (deps: WorkerDeps): JobProcessor<"sandbox.resume"> =>
  async (job) =>
    thawSandbox(forJob(deps, job.id, job.data.sandboxId), job.data.sandboxId);
