import { ForbiddenError, PayloadTooLargeError, type Sandbox, sandboxReadError } from "@tern/core";
import { conversationsRepository, type Database } from "@tern/db";
import { type SandboxDriver, sandboxFaultOf } from "@tern/sandbox";
import { runningSandbox } from "@tern/services";
import type { Kysely } from "kysely";

/** The sandbox's workspace: every conversation's directory is below it (/workspace/project, /workspace/<repo>). */
const WORKSPACE_ROOT = "/workspace";
/** Larger files are refused (413) rather than sent: this reads text for a client, not archives. */
const MAX_FILE_BYTES = 8 * 1024 * 1024;

/**
 * Resolves the path INSIDE the sandbox, as the sandbox user, so every symlink is followed as the
 * sandbox sees it (never on this host): prints the workspace root and the path, both resolved,
 * NUL-separated. A relative path is taken from the conversation's directory. `-m` resolves the
 * existing part of a missing path too, so `missing/../../etc` is judged as well.
 */
const RESOLVE_SCRIPT = `
root=$(realpath -e -- "$1") || exit 70
cd -- "$2" 2>/dev/null || cd -- "$root" || exit 70
real=$(realpath -m -- "$3") || exit 71
printf '%s\\0%s' "$root" "$real"
`;

const NOT_A_FILE = 3;
const UNREADABLE = 4;
const TOO_LARGE = 5;

/** Reads a resolved path, as the sandbox user; its exit code says why when it cannot. */
const READ_SCRIPT = `
f="$1"; max="$2"
[ -f "$f" ] || exit ${NOT_A_FILE}
[ -r "$f" ] || exit ${UNREADABLE}
size=$(stat -c %s -- "$f") || exit ${UNREADABLE}
[ "$size" -le "$max" ] || { printf '%s' "$size"; exit ${TOO_LARGE}; }
exec cat -- "$f"
`;

/** Whether `path` is `root` or below it (both absolute and resolved, so no `..` or symlink is left). */
export const isWithin = (root: string, path: string): boolean =>
  path === root || path.startsWith(root.endsWith("/") ? root : `${root}/`);

export interface ReadFileDeps {
  db: Kysely<Database>;
  sandboxes: Pick<SandboxDriver, "exec" | "inspect">;
}

/** The sandbox as a reader needs it: known, not removed, not paused, its conversation's workspace known. */
export const readableSandbox = async (
  deps: ReadFileDeps,
  rawId: string,
): Promise<{ sandbox: Sandbox; dir: string }> => {
  const sandbox = await runningSandbox(deps, rawId);
  const conversation = sandbox.conversationId
    ? await conversationsRepository(deps.db).get(sandbox.conversationId)
    : null;
  if (!conversation) throw sandboxReadError("starting", sandbox.id);
  return { sandbox, dir: conversation.workspaceDir };
};

/**
 * An exec failed in the engine: a sandbox that vanished or froze under the read is the caller's
 * GoneError or ConflictError; anything else is ours (thrown as is).
 */
export const whyExecFailed = async (deps: ReadFileDeps, sandbox: Sandbox, err: unknown): Promise<never> => {
  const fault = await sandboxFaultOf(deps.sandboxes, sandbox.ref ?? sandbox.name);
  if (fault === "gone" || fault === "paused") throw sandboxReadError(fault, sandbox.id);
  throw err;
};

/**
 * A file of the sandbox's workspace, as text: the conversation's `GET .../file`. The path is
 * resolved inside the sandbox and must stay in the workspace once resolved, symlinks included
 * (ForbiddenError); a path that names no regular file reads as "" (OpenHands' answer).
 */
export const readSandboxFile = async (deps: ReadFileDeps, sandboxId: string, path: string): Promise<string> => {
  const { sandbox, dir } = await readableSandbox(deps, sandboxId);
  const ref = sandbox.ref ?? sandbox.name;
  const resolved = await deps.sandboxes
    .exec(ref, { cmd: ["bash", "-c", RESOLVE_SCRIPT, "resolve", WORKSPACE_ROOT, dir, path], maxOutputBytes: 16_384 })
    .catch((err) => whyExecFailed(deps, sandbox, err));
  if (resolved.exitCode !== 0) throw new Error(`resolving a path in the sandbox failed: ${resolved.stderr.trim()}`);
  const [root = "", real = ""] = resolved.stdout.split("\0");
  if (!root.startsWith("/") || !real.startsWith("/") || !isWithin(root, real)) {
    throw new ForbiddenError(`file_path is outside the workspace (${WORKSPACE_ROOT}) once resolved`);
  }
  const read = await deps.sandboxes
    .exec(ref, {
      cmd: ["bash", "-c", READ_SCRIPT, "read", real, String(MAX_FILE_BYTES)],
      maxOutputBytes: MAX_FILE_BYTES + 1,
    })
    .catch((err) => whyExecFailed(deps, sandbox, err));
  switch (read.exitCode) {
    case 0:
      return read.stdout;
    case NOT_A_FILE:
      return "";
    case UNREADABLE:
      throw new ForbiddenError("The file is not readable by the sandbox user");
    case TOO_LARGE:
      throw new PayloadTooLargeError(`The file is larger than ${MAX_FILE_BYTES} bytes (${read.stdout.trim()} bytes)`);
    default:
      throw new Error(`reading a file in the sandbox failed (exit ${read.exitCode}): ${read.stderr.trim()}`);
  }
};
