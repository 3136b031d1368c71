import type { DiffFormat } from "@tern/core";
import type { WorkerReadDeps } from "./deps.ts";
import { type Caller, ownedConversation } from "./ownership.ts";
import { runningSandboxOf } from "./sandboxes.ts";
import { callWorker } from "./worker-access.ts";

/**
 * What the agent produced, read from the conversation's sandbox by a worker and streamed through:
 * the diff against the commit the conversation started from, and the workspace as an archive.
 * ConflictError while the sandbox is paused, GoneError once it was removed (before any byte is sent).
 */
export const workspaceDiff = async (
  deps: WorkerReadDeps,
  caller: Caller,
  conversationId: string,
  format: DiffFormat,
): Promise<Response> => {
  const conversation = await ownedConversation(deps, caller, conversationId);
  const sandbox = await runningSandboxOf(deps, conversation);
  return callWorker(deps, sandbox, "diff", { format }, { stream: format === "text" });
};

export const workspaceArchive = async (
  deps: WorkerReadDeps,
  caller: Caller,
  conversationId: string,
): Promise<Response> => {
  const conversation = await ownedConversation(deps, caller, conversationId);
  const sandbox = await runningSandboxOf(deps, conversation);
  return callWorker(deps, sandbox, "archive", {}, { stream: true });
};
