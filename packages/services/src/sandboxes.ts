import {
  commandRefusalOf,
  NotFoundError,
  type OwnedSandbox,
  parseId,
  readRefusalOf,
  type Sandbox,
  sandboxCommandError,
  sandboxReadError,
  UnavailableError,
} from "@tern/core";
import { sandboxesRepository } from "@tern/db";
import {
  enqueueAndWait,
  type JobName,
  JobWaitTimeoutError,
  type SandboxCommandResult,
  sandboxCommandResultSchema,
} from "@tern/queue";
import type { SandboxCommandDeps, ServiceDeps } from "./deps.ts";
import type { Caller } from "./ownership.ts";
import { newestFirstPage, type Page, type PagedReadDeps } from "./paging.ts";
import { assertQueueReady } from "./queue-availability.ts";

const DEFAULT_COMMAND_TIMEOUT_MS = 30_000;

/**
 * The caller's sandboxes among `rawIds` (32 hex or uuid), in the order asked: null where an id is
 * malformed, unknown or not the caller's. A sandbox belongs to the user of the start task that
 * made it (so of its conversation); a session key reaches its own conversation's only.
 */
export const ownedSandboxes = async (
  deps: Pick<ServiceDeps, "db">,
  caller: Caller,
  rawIds: readonly string[],
): Promise<(OwnedSandbox | null)[]> => {
  const wanted = rawIds.map(parseId);
  const found = await sandboxesRepository(deps.db).findForUser(
    caller.userId,
    wanted.filter((id): id is string => id !== null),
  );
  const allowed = (s: OwnedSandbox) =>
    caller.conversationId === undefined || s.conversationId === caller.conversationId;
  const byId = new Map(found.filter(allowed).map((s) => [s.id, s]));
  return wanted.map((id) => (id === null ? null : (byId.get(id) ?? null)));
};

/** The caller's sandboxes, newest first, a page of `limit` after `pageId`. */
export const searchSandboxes = (
  deps: PagedReadDeps,
  caller: Caller,
  req: { limit: number; pageId: string | undefined },
): Promise<Page<OwnedSandbox>> =>
  newestFirstPage({
    secret: deps.config.cursorSecret,
    scope: `sandboxes:${caller.userId}`,
    limit: req.limit,
    pageId: req.pageId,
    fetch: (after) => sandboxesRepository(deps.db).searchForUser(caller.userId, { limit: req.limit, after }),
  });

/** The caller's sandbox, or NotFoundError (also for another user's). */
export const ownedSandbox = async (
  deps: Pick<ServiceDeps, "db">,
  caller: Caller,
  rawId: string,
): Promise<OwnedSandbox> => {
  const [sandbox] = await ownedSandboxes(deps, caller, [rawId]);
  if (!sandbox) throw new NotFoundError("No such sandbox");
  return sandbox;
};

/**
 * Runs one command job on the sandbox and turns its result into the answer: done, or the domain
 * error its refusal means. The API never touches the sandbox engine; a worker does, and this waits
 * until it has (a command answered is a command in effect).
 */
const runCommand = async (
  deps: SandboxCommandDeps,
  name: Extract<JobName, "sandbox.pause" | "sandbox.resume" | "sandbox.remove">,
  sandbox: Sandbox,
): Promise<SandboxCommandResult> => {
  assertQueueReady(deps);
  const timeoutMs = deps.sandboxCommandTimeoutMs ?? DEFAULT_COMMAND_TIMEOUT_MS;
  let raw: unknown;
  try {
    // To the queue of the sandbox's engine: only its workers reach the sandbox.
    raw = await enqueueAndWait(
      deps.queues,
      deps.sandboxEvents,
      name,
      { sandboxId: sandbox.id },
      timeoutMs,
      sandbox.engineId,
    );
  } catch (err) {
    deps.logger.warn({ err, sandbox_id: sandbox.id, job: name }, "sandbox command did not complete");
    throw new UnavailableError(
      err instanceof JobWaitTimeoutError
        ? `The sandbox command did not complete within ${Math.round(timeoutMs / 1000)} s; it may still take effect`
        : "The sandbox command failed; try again shortly",
    );
  }
  const result = sandboxCommandResultSchema.parse(raw);
  if (result.outcome === "gone" || result.outcome === "starting") throw sandboxCommandError(result.outcome);
  if (result.outcome === "missing") throw new NotFoundError("No such sandbox");
  return result;
};

/**
 * Freezes the caller's sandbox: its processes stop where they are (driver.pause), and the agent
 * run of its conversation waits, neither failing nor going on, until the sandbox is resumed.
 * Pausing a paused sandbox changes nothing. GoneError once removed; ConflictError while starting.
 */
export const pauseSandbox = async (deps: SandboxCommandDeps, caller: Caller, rawId: string): Promise<void> => {
  const sandbox = await ownedSandbox(deps, caller, rawId);
  const refusal = commandRefusalOf(sandbox.status);
  if (refusal) throw sandboxCommandError(refusal);
  await runCommand(deps, "sandbox.pause", sandbox);
};

/** Thaws the caller's sandbox; a run that waited for it continues where it stopped (the same run). */
export const resumeSandbox = async (deps: SandboxCommandDeps, caller: Caller, rawId: string): Promise<void> => {
  const sandbox = await ownedSandbox(deps, caller, rawId);
  const refusal = commandRefusalOf(sandbox.status);
  if (refusal) throw sandboxCommandError(refusal);
  await runCommand(deps, "sandbox.resume", sandbox);
};

/**
 * Removes the caller's sandbox (its conversation's record and events stay; its sandbox_status is
 * MISSING from then on). Removing a removed sandbox changes nothing. ConflictError while its start
 * is going on: the start would only make it again.
 */
export const removeSandbox = async (deps: SandboxCommandDeps, caller: Caller, rawId: string): Promise<void> => {
  const sandbox = await ownedSandbox(deps, caller, rawId);
  const refusal = commandRefusalOf(sandbox.status);
  if (refusal === "gone") return;
  if (refusal) throw sandboxCommandError(refusal);
  await runCommand(deps, "sandbox.remove", sandbox);
};

/**
 * The sandbox `rawId` names (32 hex or uuid), known and running: NotFoundError when unknown,
 * ConflictError while it is paused or starting, GoneError once removed. For callers that already
 * know the sandbox is theirs (the agent-server mount checked its key; a worker serves the API).
 */
export const runningSandbox = async (deps: Pick<ServiceDeps, "db">, rawId: string): Promise<Sandbox> => {
  const id = parseId(rawId);
  const sandbox = id ? await sandboxesRepository(deps.db).get(id) : null;
  if (!sandbox) throw new NotFoundError("No such sandbox");
  const refusal = readRefusalOf(sandbox.status);
  if (refusal) throw sandboxReadError(refusal, sandbox.id);
  return sandbox;
};

/**
 * The sandbox of a conversation as a reader of its workspace needs it: there, and running.
 * ConflictError while it is paused or starting, GoneError once removed.
 */
export const runningSandboxOf = async (
  deps: Pick<ServiceDeps, "db">,
  conversation: { id: string; sandboxId: string | null },
): Promise<Sandbox> => {
  const sandbox = conversation.sandboxId ? await sandboxesRepository(deps.db).get(conversation.sandboxId) : null;
  const refusal = readRefusalOf(sandbox?.status ?? null);
  if (refusal || !sandbox) throw sandboxReadError(refusal ?? "gone", sandbox?.id ?? "");
  return sandbox;
};
