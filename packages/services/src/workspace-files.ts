import { UnavailableError } from "@tern/core";
import type { WorkerReadDeps } from "./deps.ts";
import { type Caller, ownedConversation } from "./ownership.ts";
import { runningSandboxOf } from "./sandboxes.ts";
import { callWorker } from "./worker-access.ts";

/** What OpenHands reads when no path is given (a plan the agent keeps), relative to the workspace. */
export const DEFAULT_FILE_PATH = "PLAN.md";

/**
 * A file's text from the conversation's sandbox. `filePath` is absolute or relative to the
 * conversation's workspace directory, and must stay inside the workspace once every symlink is
 * resolved (ForbiddenError otherwise); a worker resolves it inside the sandbox, as the sandbox
 * user (apps/worker/src/http/read-file.ts). As OpenHands answers, a path that names no regular
 * file reads as "". ConflictError while the sandbox is paused, GoneError once it was removed.
 */
export const readWorkspaceFile = async (
  deps: WorkerReadDeps,
  caller: Caller,
  conversationId: string,
  filePath: string,
): Promise<string> => {
  const conversation = await ownedConversation(deps, caller, conversationId);
  const sandbox = await runningSandboxOf(deps, conversation);
  const res = await callWorker(deps, sandbox, "file", { path: filePath });
  // The time limit covers the body too: cut off half-way, the worker was too slow, not the request wrong.
  return res.text().catch((err: unknown) => {
    throw err instanceof Error && (err.name === "TimeoutError" || err.name === "AbortError")
      ? new UnavailableError("The worker serving the sandbox did not answer in time")
      : err;
  });
};
