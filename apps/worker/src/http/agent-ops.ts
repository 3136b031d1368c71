import { randomUUID } from "node:crypto";
import {
  BadRequestError,
  type BashLastOutput,
  ForbiddenError,
  type GitChange,
  type GitFileDiff,
  type Logger,
  NotFoundError,
  PayloadTooLargeError,
  parseId,
  readRefusalOf,
  type Sandbox,
  sandboxReadError,
} from "@tern/core";
import { bashEventsRepository, type Database } from "@tern/db";
import type { SandboxDriver } from "@tern/sandbox";
import { runningSandbox } from "@tern/services";
import type { Kysely } from "kysely";
import { GIT_EXIT, gitScript } from "../git-scripts.ts";
import { isWithin, whyExecFailed } from "./read-file.ts";

/**
 * What the agent-server API of a sandbox (`/agent/{sandbox}/api/bash|file|git`) asks of
 * the worker that drives its engine: run a bash command (its events go to Postgres as it runs),
 * write and read a file of the workspace (streamed), and git's view of the workspace. Everything
 * runs inside the sandbox as the sandbox user, as the agent's own tools do.
 */
export interface AgentOpsDeps {
  db: Kysely<Database>;
  sandboxes: Pick<SandboxDriver, "exec" | "inspect" | "archive" | "openProcess">;
  logger: Logger;
  /** This worker's id in the worker directory: a command it takes is marked with it. */
  workerId: string;
  /**
   * Bash output kept in Postgres, in characters: per command (AGENT_BASH_OUTPUT_MAX_CHARS) and per
   * sandbox (AGENT_BASH_SANDBOX_OUTPUT_MAX_CHARS); the defaults when absent.
   */
  bashOutput?: { perCommandChars: number; perSandboxChars: number };
}

/** Every path of these routes must stay below this once resolved in the sandbox (symlinks followed there). */
const AGENT_WORKSPACE_ROOT = "/workspace";
/** The agent server splits a stream's output into events of at most this many characters. */
const MAX_CONTENT_CHARS = 1024 * 1024;
/** Past this much output a command's further output is dropped (said in its last event), not stored. */
const DEFAULT_COMMAND_OUTPUT_CHARS = 4 * MAX_CONTENT_CHARS;
/** Past this much output of a sandbox's commands, its oldest finished commands leave. */
const DEFAULT_SANDBOX_OUTPUT_CHARS = 64 * MAX_CONTENT_CHARS;
/** And past this many commands, whatever their output. */
const MAX_COMMANDS_PER_SANDBOX = 10_000;

const refOf = (sandbox: Sandbox) => sandbox.ref ?? sandbox.name;

const NO_SUCH_DIR = 97;
const NO_SUCH_DIR_MARK = "TERN_NO_SUCH_DIR";
/** The command in a bash of its own, in its directory; a directory it cannot enter is said apart (exit 97 and a mark). */
const IN_DIR_SCRIPT = `cd -- "$1" 2>/dev/null || { printf '${NO_SUCH_DIR_MARK}' >&2; exit ${NO_SUCH_DIR}; }
__tern_command=$2; set --; eval "$__tern_command"`;

// ---------------------------------------------------------------------------------------------
// bash

interface Emitter {
  push(text: string, stream: "stdout" | "stderr"): void;
  /** Forgets what is buffered (not yet stored). */
  discard(): void;
  /** Stores the last event; it as stored (null: the command was already ended, nothing written). */
  finish(exitCode: number, extraStderr?: string): Promise<BashLastOutput | null>;
  /** The output not stored yet, as an output with no exit code (not stored: the command goes on). */
  soFar(): BashLastOutput;
}

/**
 * BashOutput events as OpenHands' BashEventService emits them: each stream buffered, a chunk
 * event whenever a buffer passes MAX_CONTENT_CHARS, then one last event with what is left of both
 * and the exit code; `order` counts the events of the command from 0. Writes are chained, so
 * they reach Postgres in order. Past the command's bound the rest is dropped (its last event says
 * so); once it ended, the sandbox's stored output is brought within the sandbox's bound.
 */
const outputEmitter = (deps: AgentOpsDeps, sandboxId: string, commandId: string): Emitter => {
  const repo = bashEventsRepository(deps.db);
  const maxStored = deps.bashOutput?.perCommandChars ?? DEFAULT_COMMAND_OUTPUT_CHARS;
  const buffers = { stdout: "", stderr: "" };
  let order = 0;
  let stored = 0;
  let dropped = false;
  let chain: Promise<boolean> = Promise.resolve(false);
  const write = (o: { stdout: string | null; stderr: string | null; exitCode: number | null }) => {
    const event = { id: randomUUID(), commandId, order: order++, timestamp: new Date(), ...o };
    chain = chain.then(() =>
      repo.appendOutput(sandboxId, event).catch((err) => {
        deps.logger.warn({ err, command_id: commandId }, "storing a bash output failed");
        return false;
      }),
    );
    return event;
  };
  return {
    push(text, stream) {
      if (dropped) return;
      if (stored + text.length > maxStored) {
        dropped = true;
        return;
      }
      stored += text.length;
      buffers[stream] += text;
      while (buffers[stream].length > MAX_CONTENT_CHARS) {
        const chunk = buffers[stream].slice(0, MAX_CONTENT_CHARS);
        buffers[stream] = buffers[stream].slice(MAX_CONTENT_CHARS);
        write({
          stdout: stream === "stdout" ? chunk : null,
          stderr: stream === "stderr" ? chunk : null,
          exitCode: null,
        });
      }
    },
    discard() {
      buffers.stdout = "";
      buffers.stderr = "";
    },
    soFar() {
      return {
        id: randomUUID(),
        timestamp: new Date().toISOString(),
        order,
        exitCode: null,
        stdout: buffers.stdout || null,
        stderr: buffers.stderr || null,
      };
    },
    async finish(exitCode, extraStderr) {
      const note = dropped ? `\n[output past ${maxStored} characters was dropped]` : "";
      const stderr = buffers.stderr + (extraStderr ?? "") + note;
      const last = write({ stdout: buffers.stdout || null, stderr: stderr || null, exitCode });
      if (!(await chain)) return null;
      await repo
        .pruneOutput(
          sandboxId,
          deps.bashOutput?.perSandboxChars ?? DEFAULT_SANDBOX_OUTPUT_CHARS,
          MAX_COMMANDS_PER_SANDBOX,
        )
        .catch((err) => deps.logger.warn({ err, sandbox_id: sandboxId }, "bounding the sandbox's bash output failed"));
      return {
        id: last.id,
        timestamp: last.timestamp.toISOString(),
        order: last.order,
        exitCode: last.exitCode,
        stdout: last.stdout,
        stderr: last.stderr,
      };
    },
  };
};

/**
 * Starts a stored command (`/api/bash/start_bash_command` wrote it) in the sandbox, in its own bash
 * as the sandbox user, and stores its output as it comes; `done` settles once its last event is
 * stored, with that event (null when the command was ended by someone else, or was not run here);
 * `soFar` is its output not stored yet, for an answer that cannot wait for its end.
 * A command that cannot start (a cwd that does not exist) ends with exit -1 and the reason, as the
 * agent server's does; one past its timeout is killed (its process group) and ends with exit -1.
 * The sandbox is read and the command taken in one statement (its hot path is one round trip).
 */
export const startBashCommand = async (
  deps: AgentOpsDeps,
  rawSandboxId: string,
  commandId: string,
): Promise<{ done: Promise<BashLastOutput | null>; soFar: () => BashLastOutput | null }> => {
  const sandboxId = parseId(rawSandboxId);
  const id = parseId(commandId);
  const repo = bashEventsRepository(deps.db);
  const found = sandboxId && id ? await repo.dispatchInSandbox(sandboxId, id, deps.workerId, new Date()) : null;
  if (!found) {
    if (sandboxId && !id) await runningSandbox(deps, rawSandboxId);
    throw new NotFoundError(sandboxId && !id ? "No such bash command" : "No such sandbox");
  }
  const { sandbox, workspaceDir, command } = found;
  const refusal = readRefusalOf(sandbox.status);
  if (refusal) throw sandboxReadError(refusal, sandbox.id);
  if (!command) {
    const known = id ? await repo.getCommand(id) : null;
    if (known?.sandboxId === sandbox.id) return { done: Promise.resolve(null), soFar: () => null };
    throw new NotFoundError("No such bash command");
  }
  const out = outputEmitter(deps, sandbox.id, command.id);
  return { done: runStored(deps, sandbox, workspaceDir ?? AGENT_WORKSPACE_ROOT, command, out), soFar: out.soFar };
};

const runStored = async (
  deps: AgentOpsDeps,
  sandbox: Sandbox,
  dir: string,
  command: { id: string; command: string; cwd: string | null; timeout: number },
  out: Emitter,
): Promise<BashLastOutput | null> => {
  try {
    let stderrHead = "";
    const r = await deps.sandboxes.exec(refOf(sandbox), {
      cmd: ["bash", "-c", IN_DIR_SCRIPT, "bash", command.cwd ?? dir, command.command],
      timeoutMs: Math.max(1, command.timeout) * 1000,
      // Kept by the emitter, not by the driver.
      maxOutputBytes: 1,
      onOutput: (chunk, stream) => {
        if (stream === "stderr" && stderrHead.length < NO_SUCH_DIR_MARK.length) stderrHead += chunk;
        out.push(chunk, stream);
      },
    });
    if (r.exitCode === NO_SUCH_DIR && stderrHead.startsWith(NO_SUCH_DIR_MARK)) {
      // As the agent server's, whose subprocess cannot start there: an error event, exit -1.
      out.discard();
      return await out.finish(
        -1,
        `Error executing command: [Errno 2] No such file or directory: '${command.cwd ?? dir}'`,
      );
    }
    return await out.finish(r.timedOut || r.exitCode === null ? -1 : r.exitCode);
  } catch (err) {
    const reason = await whyExecFailed(deps, sandbox, err).catch((e: unknown) => e);
    return await out.finish(
      -1,
      `Error executing command: ${reason instanceof Error ? reason.message : String(reason)}`,
    );
  }
};

// ---------------------------------------------------------------------------------------------
// paths

/**
 * Resolves an absolute path INSIDE the sandbox, as the sandbox user, every symlink followed as the
 * sandbox sees it: prints the workspace root, the resolved path and what it is (file, dir,
 * missing, other), NUL-separated. `-m` resolves a missing tail too, so `missing/../../etc` is judged.
 */
const RESOLVE_SCRIPT = `
root=$(realpath -e -- "$1") || exit 70
real=$(realpath -m -- "$2") || exit 71
if [ -f "$real" ]; then kind=file; elif [ -d "$real" ]; then kind=dir; elif [ -e "$real" ]; then kind=other; else kind=missing; fi
printf '%s\\0%s\\0%s' "$root" "$real" "$kind"
`;

type PathKind = "file" | "dir" | "missing" | "other";

/** An absolute path of the workspace, resolved in the sandbox; 400 when relative, 403 once outside the workspace. */
const workspacePath = async (
  deps: AgentOpsDeps,
  sandbox: Sandbox,
  path: string,
): Promise<{ root: string; real: string; kind: PathKind }> => {
  if (!path.startsWith("/")) throw new BadRequestError("Path must be absolute");
  if (path.includes("\0")) throw new BadRequestError("Path must not contain NUL");
  const r = await deps.sandboxes
    .exec(refOf(sandbox), {
      cmd: ["bash", "-c", RESOLVE_SCRIPT, "resolve", AGENT_WORKSPACE_ROOT, path],
      maxOutputBytes: 16_384,
    })
    .catch((err) => whyExecFailed(deps, sandbox, err));
  if (r.exitCode !== 0) throw new Error(`resolving a path in the sandbox failed: ${r.stderr.trim()}`);
  const [root = "", real = "", kind = "missing"] = r.stdout.split("\0");
  if (!root.startsWith("/") || !real.startsWith("/") || !isWithin(root, real)) {
    throw new ForbiddenError(`Path is outside the workspace (${AGENT_WORKSPACE_ROOT}) once resolved`);
  }
  return { root, real, kind: kind as PathKind };
};

// ---------------------------------------------------------------------------------------------
// files

/**
 * Writes what comes on stdin to a temporary file beside the target (parents created); prints OK
 * once its input ended. The file is renamed into place by a second exec, only once the upload
 * arrived whole: a cut or refused upload never leaves a file (its temporary one is removed).
 */
const WRITE_SCRIPT = `
set -e
mkdir -p -- "$(dirname -- "$1")"
exec 3> "$1"
printf READY
cat >&3
printf OK
`;

const PLACE_SCRIPT = `mv -f -- "$1" "$2"`;
const DISCARD_SCRIPT = `rm -f -- "$1"`;

/**
 * Writes `body` to `path` of the workspace, streamed into the sandbox as it comes (never held
 * whole); more than `maxBytes` is PayloadTooLargeError and nothing is written.
 */
export const uploadWorkspaceFile = async (
  deps: AgentOpsDeps,
  rawSandboxId: string,
  path: string,
  body: ReadableStream<Uint8Array> | null,
  maxBytes: number,
): Promise<void> => {
  const sandbox = await runningSandbox(deps, rawSandboxId);
  const { real, kind } = await workspacePath(deps, sandbox, path);
  if (kind === "dir" || kind === "other") throw new BadRequestError("Path is not a file");
  if (!deps.sandboxes.openProcess) throw new Error("the sandbox driver cannot stream into a sandbox");
  const ref = refOf(sandbox);
  const tmp = `${real.slice(0, real.lastIndexOf("/"))}/.tern-upload-${randomUUID()}`;
  const proc = await deps.sandboxes.openProcess(ref, { cmd: ["bash", "-c", WRITE_SCRIPT, "write", tmp] });
  let out = "";
  let err = "";
  let opened: () => void = () => undefined;
  // The temporary file exists before any byte is sent: a discard can never come before it.
  const ready = new Promise<void>((resolve) => {
    opened = resolve;
  });
  proc.onStdout((c) => {
    out += c.toString();
    if (out.startsWith("READY")) opened();
  });
  proc.onStderr((c) => {
    err += c.toString();
  });
  let total = 0;
  try {
    await Promise.race([
      ready,
      proc.closed.then(() => {
        if (!out.startsWith("READY")) throw new Error(`writing the file in the sandbox failed: ${err.trim()}`);
      }),
    ]);
    if (body) {
      for await (const chunk of body as unknown as AsyncIterable<Uint8Array>) {
        total += chunk.byteLength;
        if (total > maxBytes) throw new PayloadTooLargeError(`The file is larger than ${maxBytes} bytes`);
        proc.write(Buffer.from(chunk));
      }
    }
    proc.end();
    await proc.closed;
    if (!out.startsWith("READYOK")) throw new Error(`writing the file in the sandbox failed: ${err.trim()}`);
    const placed = await deps.sandboxes.exec(ref, { cmd: ["bash", "-c", PLACE_SCRIPT, "place", tmp, real] });
    if (placed.exitCode !== 0) throw new Error(`writing the file in the sandbox failed: ${placed.stderr.trim()}`);
  } catch (e) {
    proc.detach();
    await deps.sandboxes.exec(ref, { cmd: ["bash", "-c", DISCARD_SCRIPT, "discard", tmp] }).catch(() => undefined);
    throw e;
  }
};

/**
 * Streams a file as the sandbox user: the file is opened by that user (fd 3), and what the open
 * reached, read back from /proc, must be a regular file under the workspace root ($2). So a path
 * swapped after the check (a directory replaced by a symlink to /etc) reads at most what the
 * sandbox user may read, and only below the workspace; a refusal is a mark on stderr. One byte
 * `X` on stdout says the open passed; the file's bytes follow.
 */
const READ_SCRIPT = `
exec 3< "$1" 2>/dev/null || { printf 'TERN_UNREADABLE' >&2; exit 1; }
real=$(readlink -f "/proc/$$/fd/3") || { printf 'TERN_UNREADABLE' >&2; exit 1; }
case "$real" in "$2"/*) ;; *) printf 'TERN_OUTSIDE' >&2; exit 1 ;; esac
[ -f "/proc/$$/fd/3" ] || { printf 'TERN_NOT_A_FILE' >&2; exit 1; }
printf X
exec cat <&3
`;

/**
 * A regular file of the workspace, streamed as the sandbox user reads it (an exec, never the
 * engine's archive API, which reads as root); 404 when missing, 400 when not a file, 403 when it
 * is outside the workspace or not the sandbox user's to read. The process's output is read only
 * as fast as the client takes it.
 */
export const downloadWorkspaceFile = async (
  deps: AgentOpsDeps,
  rawSandboxId: string,
  path: string,
): Promise<{ name: string; body: ReadableStream<Uint8Array> }> => {
  const sandbox = await runningSandbox(deps, rawSandboxId);
  const { root, real, kind } = await workspacePath(deps, sandbox, path);
  if (kind === "missing") throw new NotFoundError("File not found");
  if (kind !== "file") throw new BadRequestError("Path is not a file");
  if (!deps.sandboxes.openProcess) throw new Error("the sandbox driver cannot stream out of a sandbox");
  const proc = await deps.sandboxes
    .openProcess(refOf(sandbox), { cmd: ["bash", "-c", READ_SCRIPT, "read", real, root] })
    .catch((err) => whyExecFailed(deps, sandbox, err));
  proc.end();
  let stderr = "";
  proc.onStderr((c) => {
    stderr += c.toString();
  });
  let opened = false;
  let controller: ReadableStreamDefaultController<Uint8Array> | undefined;
  const started = new Promise<boolean>((resolve) => {
    proc.onStdout((chunk) => {
      let data = chunk;
      if (!opened) {
        opened = true;
        resolve(true);
        data = chunk.subarray(1);
      }
      if (data.length === 0) return;
      controller?.enqueue(new Uint8Array(data));
      if ((controller?.desiredSize ?? 1) <= 0) proc.pause();
    });
    void proc.closed.then(() => resolve(opened));
  });
  const body = new ReadableStream<Uint8Array>(
    {
      start(c) {
        controller = c;
      },
      pull() {
        proc.resume();
      },
      cancel() {
        proc.detach();
      },
    },
    { highWaterMark: 4, size: () => 1 },
  );
  void proc.closed.then(() => {
    if (opened) controller?.close();
  });
  if (!(await started)) {
    proc.detach();
    if (stderr.includes("TERN_OUTSIDE")) {
      throw new ForbiddenError(`Path is outside the workspace (${AGENT_WORKSPACE_ROOT}) once resolved`);
    }
    if (stderr.includes("TERN_NOT_A_FILE")) throw new BadRequestError("Path is not a file");
    throw new ForbiddenError("The file is not readable by the sandbox user");
  }
  return { name: real.slice(real.lastIndexOf("/") + 1), body };
};

// ---------------------------------------------------------------------------------------------
// git

const statusOf = (code: string): GitChange["status"] | null =>
  code === "M" || code === "U" || code.startsWith("T")
    ? "UPDATED"
    : code === "A"
      ? "ADDED"
      : code === "D"
        ? "DELETED"
        : null;

/** GitChange list of the repository at `path` (a directory of the workspace); [] when it is not a repository. */
export const workspaceGitChanges = async (
  deps: AgentOpsDeps,
  rawSandboxId: string,
  path: string,
  ref: string | undefined,
): Promise<GitChange[]> => {
  const sandbox = await runningSandbox(deps, rawSandboxId);
  const { real } = await workspacePath(deps, sandbox, path);
  const r = await deps.sandboxes
    .exec(refOf(sandbox), {
      cmd: gitScript("changes", real, ref ?? ""),
      maxOutputBytes: 16 * 1024 * 1024,
    })
    .catch((err) => whyExecFailed(deps, sandbox, err));
  if (r.exitCode === GIT_EXIT.notARepository) return [];
  if (r.exitCode === GIT_EXIT.badRef) throw new BadRequestError(`Invalid git ref: ${ref}`);
  if (r.exitCode !== 0) throw new BadRequestError(`git failed (exit ${r.exitCode}): ${r.stderr.trim()}`);
  const [tracked = "", untracked = ""] = r.stdout.split("\0--untracked--\0");
  const fields = tracked.split("\0").filter((f) => f !== "");
  const changes: GitChange[] = [];
  for (let i = 0; i < fields.length; ) {
    const code = fields[i++] ?? "";
    if (code.startsWith("R")) {
      changes.push({ status: "DELETED", path: fields[i++] ?? "" }, { status: "ADDED", path: fields[i++] ?? "" });
    } else if (code.startsWith("C")) {
      i++;
      changes.push({ status: "ADDED", path: fields[i++] ?? "" });
    } else {
      const status = statusOf(code);
      const p = fields[i++] ?? "";
      if (status) changes.push({ status, path: p });
    }
  }
  for (const p of untracked.split("\0")) if (p) changes.push({ status: "ADDED", path: p });
  return changes;
};

/** GitDiff of one file of the workspace: its content now (`modified`) and at the ref (`original`). */
export const workspaceGitDiff = async (
  deps: AgentOpsDeps,
  rawSandboxId: string,
  path: string,
  ref: string | undefined,
): Promise<GitFileDiff> => {
  const sandbox = await runningSandbox(deps, rawSandboxId);
  const { real } = await workspacePath(deps, sandbox, path);
  const r = await deps.sandboxes
    .exec(refOf(sandbox), {
      cmd: gitScript("file-diff", real, ref ?? ""),
      maxOutputBytes: 32 * 1024 * 1024,
    })
    .catch((err) => whyExecFailed(deps, sandbox, err));
  if (r.exitCode === GIT_EXIT.notARepository) return { modified: null, original: null };
  if (r.exitCode === GIT_EXIT.badRef) throw new BadRequestError(`Invalid git ref: ${ref}`);
  if (r.exitCode !== 0) throw new BadRequestError(`git failed (exit ${r.exitCode}): ${r.stderr.trim()}`);
  if (r.truncated) throw new PayloadTooLargeError("The file is too large to diff");
  const [now = "N", then = "N"] = r.stdout.split("\0--original--\0");
  return {
    modified: now.startsWith("M") ? now.slice(1) : null,
    original: then.startsWith("O") ? then.slice(1) : null,
  };
};
