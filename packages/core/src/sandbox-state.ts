import type { SandboxStatus } from "./domain.ts";
import { ConflictError, type DomainError, GoneError } from "./errors.ts";
import { toHexId } from "./ids.ts";

/**
 * THE RULE OF WHAT A SANDBOX'S STATE ALLOWS, and the one set of messages that refuse: the API's
 * services (commands, reads, runs), the worker's sandbox commands and its internal reads all ask
 * here, so "gone", "readable" and "runnable" mean the same everywhere.
 */

/** Removed, or its start failed: it will not run again. */
export const isSandboxGone = (status: SandboxStatus): boolean => status === "MISSING" || status === "ERROR";

/** Why a sandbox refuses a use now. */
export type SandboxRefusal = "gone" | "starting" | "paused";

/**
 * Why a command that changes the sandbox (pause, resume) may not run in `status`; null: it may.
 * Removal takes a gone sandbox as done, so it refuses `starting` only.
 */
export const commandRefusalOf = (status: SandboxStatus): Extract<SandboxRefusal, "gone" | "starting"> | null =>
  isSandboxGone(status) ? "gone" : status === "STARTING" ? "starting" : null;

/** Why the workspace of a sandbox in `status` (null: it has none) cannot be read now; null: it can. */
export const readRefusalOf = (status: SandboxStatus | null): SandboxRefusal | null =>
  status === null || isSandboxGone(status)
    ? "gone"
    : status === "PAUSED"
      ? "paused"
      : status !== "RUNNING"
        ? "starting"
        : null;

/** Whether the agent may run in a conversation whose sandbox is in `status` (a gone one never again). */
export const isSandboxRunnable = (status: SandboxStatus | null): boolean => status === null || !isSandboxGone(status);

/** The refusal of a command (pause, resume, remove) on a sandbox, as its caller hears it. */
export const sandboxCommandError = (refusal: Extract<SandboxRefusal, "gone" | "starting">): DomainError =>
  refusal === "gone"
    ? new GoneError("The sandbox was removed; it cannot be paused or resumed any more")
    : new ConflictError("The sandbox is still starting; wait until its conversation is READY, then try again");

/** The refusal of a read of the workspace of sandbox `sandboxId`. */
export const sandboxReadError = (refusal: SandboxRefusal, sandboxId: string): DomainError => {
  switch (refusal) {
    case "gone":
      return new GoneError("The conversation's sandbox was removed; its workspace is gone");
    case "paused":
      return new ConflictError(
        `The conversation's sandbox is paused; resume it first (POST /api/v1/sandboxes/${toHexId(sandboxId)}/resume)`,
      );
    case "starting":
      return new ConflictError("The conversation's sandbox is still starting");
  }
};

/**
 * The refusal of a run of the agent in a conversation whose sandbox is gone: 410 when it was lost
 * with its engine (no worker of that engine for ENGINE_LOST_AFTER), saying so; 409 when removed.
 */
export const sandboxRunError = (sandbox: { engineId: string | null; engineLostAt: unknown } | null): DomainError =>
  sandbox?.engineLostAt
    ? new GoneError(
        `The conversation's sandbox is lost with its engine (${sandbox.engineId}): no worker of that engine was alive for ENGINE_LOST_AFTER. The conversation and its events are kept; start a new conversation to go on`,
      )
    : new ConflictError("The conversation's sandbox was removed; the agent cannot run any more");
