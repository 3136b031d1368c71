/**
 * THE CONTRACT OF THE WORKERS' INTERNAL AGENT-SERVER OPERATIONS: what the API's
 * `/agent/{sandbox}/api/bash|file|git` routes ask of the worker driving the sandbox's engine
 * (apps/worker/src/http/agent-ops.ts does them; @tern/services' agent-sandbox-ops.ts asks). Beside
 * worker-api.ts's reads, these also run a command and write a file, so they are not all GETs.
 */
export const agentOpsApi = {
  /** POST: runs a stored bash command (`?wait=1`: answers once its last output is stored). */
  bash: "/internal/sandboxes/:sandboxId/bash/:commandId",
  /** POST `?path=&max=`: the body, raw, written to the file (streamed). GET `?path=`: the file, streamed. */
  files: "/internal/sandboxes/:sandboxId/agent-files",
  /** GET `?path=&ref=`: GitChange[] of the repository at path. */
  gitChanges: "/internal/sandboxes/:sandboxId/git/changes",
  /** GET `?path=&ref=`: GitDiff of one file. */
  gitDiff: "/internal/sandboxes/:sandboxId/git/diff",
} as const;

export type AgentOp = keyof typeof agentOpsApi;

/** The path of an operation on one sandbox, with its query. */
export const agentOpsPath = (
  op: AgentOp,
  params: { sandboxId: string; commandId?: string },
  query: Record<string, string | undefined> = {},
): string => {
  const path = agentOpsApi[op]
    .replace(":sandboxId", encodeURIComponent(params.sandboxId))
    .replace(":commandId", encodeURIComponent(params.commandId ?? ""));
  const search = new URLSearchParams(
    Object.entries(query).filter((e): e is [string, string] => e[1] !== undefined),
  ).toString();
  return search ? `${path}?${search}` : path;
};
