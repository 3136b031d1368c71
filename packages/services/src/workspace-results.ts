import type { WorkerReadDeps } from "./deps.ts";
import { type Caller, ownedConversation } from "./ownership.ts";
import { runningSandboxOf } from "./sandboxes.ts";
import { fetchFromWorker } from "./worker-access.ts";

/**
 * What the agent produced, read from the conversation's sandbox by a worker and streamed through:
 * the diff against the commit the conversation started from, and the workspace as an archive.
 * ConflictError while the sandbox is paused, GoneError once it was removed (before any byte is sent).
 */
export const workspaceDiff = async (
  deps: WorkerReadDeps,
  caller: Caller,
  conversationId: string,
  format: "text" | "json",
): Promise<Response> => {
  const conversation = await ownedConversation(deps, caller, conversationId);
  const sandbox = await runningSandboxOf(deps, conversation);
  return fetchFromWorker(deps, sandbox, `/internal/sandboxes/${sandbox.id}/diff?format=${format}`, {
    stream: format === "text",
  });
};

export const workspaceArchive = async (
  deps: WorkerReadDeps,
  caller: Caller,
  conversationId: string,
): Promise<Response> => {
  const conversation = await ownedConversation(deps, caller, conversationId);
  const sandbox = await runningSandboxOf(deps, conversation);
  return fetchFromWorker(deps, sandbox, `/internal/sandboxes/${sandbox.id}/workspace.tar.gz`, { stream: true });
};
