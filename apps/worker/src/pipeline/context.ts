import { createHash } from "node:crypto";
import { type Logger, RepositoryFaultError, type StartTask, toHexId } from "@tern/core";
import type { ExecOptions, ExecResult, SandboxRef } from "@tern/sandbox";
import type { WorkerDeps } from "../deps.ts";
import type { WorkerClone } from "../git/clone.ts";
import type { RepositorySpec } from "./repository-spec.ts";

/** What every stage of one start job gets. */
export interface StartContext {
  deps: WorkerDeps;
  task: StartTask;
  /** The fencing token of this job attempt: every write of the stage carries it. */
  attempt: number;
  log: Logger;
}

export interface AcquiredSandbox {
  /** The sandboxes row. */
  sandboxId: string;
  /** The driver's reference: what every stage runs its commands in. */
  ref: SandboxRef;
  name: string;
  /** A warm pool sandbox: its empty workspace was made ahead (the pool's `prepare`, emptyWorkspaceWarmUp). */
  emptyWorkspaceReady?: boolean;
}

export interface Workspace {
  /** Absolute path of the git repository inside the sandbox. */
  dir: string;
  repository: RepositorySpec | null;
  /** Whether `.openhands/pre-commit.sh` exists, when PREPARING_REPOSITORY's exec looked (else look). */
  hasPreCommitScript?: boolean;
  /** False when PREPARING_REPOSITORY's exec saw no `.openhands/setup.sh` (else the setup stage looks). */
  hasSetupScript?: boolean;
  /** Whether any skill file exists, when PREPARING_REPOSITORY's exec looked (else look). */
  hasSkills?: boolean;
  /** The commit the clone checked out (a start from a snapshot: the snapshot's). */
  commit?: string;
  /** Git's hash of `.openhands/setup.sh` as cloned, when there is one: part of a snapshot's key. */
  setupHash?: string;
  /**
   * The clone still on the worker, with a setup script: that script's exec unpacks and places it
   * first, and says then what the facts above are (else PREPARING_REPOSITORY's exec did).
   */
  unplaced?: WorkerClone;
  /** Made from a repository snapshot: cloned and set up already. */
  fromSnapshot?: boolean;
}

/** Fixed per task, so a second attempt finds (adopts) the sandbox of the first. */
export const sandboxNameForTask = (taskId: string): string => `tern-task-${toHexId(taskId)}`;

/**
 * Fixed per task too: the sandbox carries it as a label from its creation on, and a re-run
 * of the last stage finds the conversation it already made.
 */
export const conversationIdForTask = (taskId: string): string => {
  const h = createHash("sha256").update(`tern:conversation:${taskId}`).digest("hex");
  // Shaped as an RFC 9562 version 8 (custom) UUID.
  const variant = ((Number.parseInt(h[16] ?? "0", 16) & 0x3) | 0x8).toString(16);
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-8${h.slice(13, 16)}-${variant}${h.slice(17, 20)}-${h.slice(20, 32)}`;
};

/** A stage's write was refused: another attempt owns the task now, or it is finished. */
export class LostOwnership extends Error {
  constructor(taskId: string) {
    super(`start task ${taskId} is no longer owned by this attempt`);
    this.name = "LostOwnership";
  }
}

/** The last `n` non-empty lines of some output, for an error detail. */
export const lastLines = (text: string, n = 5, maxChars = 600): string => {
  const lines = text.split(/\r?\n/).filter((l) => l.trim() !== "");
  const tail = lines.slice(-n).join("\n");
  return tail.length > maxChars ? `…${tail.slice(-maxChars)}` : tail;
};

/**
 * Runs a command that must succeed. Whose fault a non-zero exit is depends on what ran before it:
 * before any repository code, a passing fault (retried); once the repository's code has run (its
 * setup script, then its hooks and skills), the repository's (ERROR at once: a retry would run
 * earlier stages again in a container that code controls). An engine error throws as it is.
 */
export const execChecked = async (
  ctx: StartContext,
  sandbox: SandboxRef,
  opts: ExecOptions,
  what: string,
  onFailure: "retry" | "repository_fault" = "retry",
): Promise<ExecResult> => checked(await ctx.deps.sandboxes.exec(sandbox, opts), what, onFailure);

/** An exec's result that must be a success (execChecked's check, for an exec run some other way). */
export const checked = (r: ExecResult, what: string, onFailure: "retry" | "repository_fault" = "retry"): ExecResult => {
  if (r.exitCode !== 0) {
    const message = `${what} failed (exit ${r.exitCode ?? "none"}): ${lastLines(r.stderr || r.stdout, 3)}`;
    throw onFailure === "repository_fault" ? new RepositoryFaultError(message) : new Error(message);
  }
  return r;
};
