import { randomUUID } from "node:crypto";
import { type BashLastOutput, parseId, QuotaExceededError, UnavailableError } from "@tern/core";
import { type BashCommandRow, type BashEventQuery, type BashEventRow, bashEventsRepository } from "@tern/db";
import { liveWorkers } from "@tern/queue";
import type { WorkerReadDeps } from "./deps.ts";
import { runningSandbox } from "./sandboxes.ts";
import { callWorker, workerResult } from "./worker-access.ts";

/**
 * The agent-server's `/api/bash`, `/api/file` and `/api/git` of one sandbox, served from
 * tern's processes: the API stores and reads the bash events (Postgres), and a worker of the
 * sandbox's engine does what needs the sandbox (apps/worker/src/http/agent-ops.ts), reached as
 * worker-access.ts reaches it. The sandbox is the caller's (the agent-server mount checked); these
 * check its state by the one rule (sandbox-state.ts): 409 while paused or starting, 410 once gone.
 */

/** A command the API stored but no worker took for this long is taken as never started. */
const UNDISPATCHED_GRACE_MS = 60_000;

// ---------------------------------------------------------------------------------------------
// bash

/** The agent server's hex UUIDs (OpenHandsUUID: no hyphens). */
const hex = (uuid: string) => uuid.replaceAll("-", "");

/** A BashEventBase as the agent server serialises it (pydantic, `kind` discriminator). */
export const bashEventJson = (e: BashEventRow) =>
  e.kind === "BashCommand"
    ? {
        kind: "BashCommand" as const,
        id: hex(e.id),
        timestamp: e.timestamp.toISOString(),
        command: e.command,
        cwd: e.cwd,
        timeout: e.timeout,
      }
    : {
        kind: "BashOutput" as const,
        id: hex(e.id),
        timestamp: e.timestamp.toISOString(),
        command_id: hex(e.commandId),
        order: e.order,
        exit_code: e.exitCode,
        stdout: e.stdout,
        stderr: e.stderr,
      };

export type BashEventJson = ReturnType<typeof bashEventJson>;

export interface ExecuteBashRequest {
  command: string;
  cwd: string | null;
  timeout: number;
}

/**
 * Ends the sandbox's commands whose worker is gone (its directory entry expired, or a newer
 * process holds its id) with an error exit, as the agent server ends a command that failed: a
 * poll after a worker's death finds the command finished rather than running forever. So does a
 * command no worker took within UNDISPATCHED_GRACE_MS.
 */
export const finishOrphanedCommands = async (deps: WorkerReadDeps, sandboxId: string): Promise<number> => {
  const repo = bashEventsRepository(deps.db);
  const running = await repo.unfinished(sandboxId);
  if (running.length === 0) return 0;
  const live = await liveWorkers(deps.redis, deps.workerAccess.prefix);
  const now = Date.now();
  let finished = 0;
  for (const command of running) {
    const orphan = command.workerId
      ? !live.some(
          (w) =>
            w.workerId === command.workerId &&
            Date.parse(w.startedAt) <= (command.dispatchedAt?.getTime() ?? Number.POSITIVE_INFINITY),
        )
      : now - command.timestamp.getTime() > UNDISPATCHED_GRACE_MS;
    if (!orphan) continue;
    const order = (await repo.lastOrder(command.id)) + 1;
    const done = await repo.appendOutput(sandboxId, {
      id: randomUUID(),
      commandId: command.id,
      order,
      exitCode: -1,
      stdout: null,
      stderr: command.workerId
        ? "Error executing command: the worker running it stopped before it finished"
        : "Error executing command: no worker took it",
    });
    if (done) {
      finished++;
      deps.logger.warn({ command_id: command.id, worker_id: command.workerId }, "an orphaned bash command was ended");
    }
  }
  return finished;
};

/** How long a worker may take past a waited command's own deadline to answer. */
const WAIT_MARGIN_MS = 60_000;
/** A command stored while the sandbox has this many running is refused; a slot frees in seconds. */
const IN_FLIGHT_RETRY_AFTER_S = 5;

/**
 * Stores the command and has a worker run it. `wait`: resolves once it finished (its last output
 * stored), with that output when the worker said what it stored (null: read it back), or after
 * `maxWaitMs` with its output so far (exit code null; the command goes on). A worker that cannot
 * be reached leaves the command ended with an error exit, not running.
 * The sandbox's state, and its commands in flight against `maxInFlight` (QuotaExceededError past
 * it), are checked in the statement that stores the command (one round trip).
 */
export const startAgentBashCommand = async (
  deps: WorkerReadDeps,
  sandboxId: string,
  request: ExecuteBashRequest,
  opts: { wait?: boolean; maxWaitMs?: number; maxInFlight?: number } = {},
): Promise<{ command: BashCommandRow; last: BashEventJson | null }> => {
  const repo = bashEventsRepository(deps.db);
  const id = parseId(sandboxId);
  const ownDeadlineMs = request.timeout * 1000 + WAIT_MARGIN_MS;
  const waitMs = Math.min(ownDeadlineMs, opts.maxWaitMs ?? ownDeadlineMs);
  // A command waited for to its end is answered only after its last output's synchronous commit,
  // which flushes this one too; any other (answered at once, or maybe before its end) is flushed
  // before its answer.
  const flushedLater = !!opts.wait && waitMs === ownDeadlineMs;
  const stored = id
    ? await repo.insertCommandIfRunning(
        { id: randomUUID(), sandboxId: id, ...request },
        { flushedLater, ...(opts.maxInFlight ? { maxInFlight: opts.maxInFlight } : {}) },
      )
    : null;
  if (stored?.full) {
    throw new QuotaExceededError(
      `Quota AGENT_BASH_MAX_IN_FLIGHT reached: ${opts.maxInFlight} bash commands are running in this sandbox; ` +
        "wait until one ends",
      "AGENT_BASH_MAX_IN_FLIGHT",
      opts.maxInFlight ?? 0,
      IN_FLIGHT_RETRY_AFTER_S,
    );
  }
  if (!stored?.command) {
    // Not stored: the one rule says why (404, 409 while paused or starting, 410 once gone).
    await runningSandbox(deps, sandboxId);
    throw new UnavailableError("The sandbox is not running; try again shortly");
  }
  const command = stored.command;
  const sandbox = { id: command.sandboxId, engineId: stored.engineId };
  let last: BashEventJson | null = null;
  try {
    const res = await callWorker(deps, sandbox, "bash", opts.wait ? { wait: "1", max_wait_ms: waitMs } : {}, {
      params: { commandId: command.id },
      ...(opts.wait ? { timeoutMs: waitMs + WAIT_MARGIN_MS } : {}),
    });
    if (opts.wait) {
      // Finished: its last output, stored. Not yet (past maxWaitMs): its output so far, not stored.
      const out: BashLastOutput | null | undefined = (await workerResult("bash", res).catch(() => null))?.last;
      if (out) {
        last = bashEventJson({
          kind: "BashOutput",
          id: out.id,
          position: "",
          sandboxId: command.sandboxId,
          timestamp: new Date(out.timestamp),
          commandId: command.id,
          order: out.order,
          exitCode: out.exitCode,
          stdout: out.stdout,
          stderr: out.stderr,
        });
      }
    } else await res.body?.cancel();
  } catch (err) {
    // A worker that died under a waited command: the orphan rule ends it; anything else ends it now.
    if (!opts.wait || !(await finishOrphanedCommands(deps, command.sandboxId))) {
      await repo.appendOutput(command.sandboxId, {
        id: randomUUID(),
        commandId: command.id,
        order: (await repo.lastOrder(command.id)) + 1,
        exitCode: -1,
        stdout: null,
        stderr: `Error executing command: ${err instanceof Error ? err.message : String(err)}`,
      });
    }
    if (!opts.wait) throw err;
  }
  return { command, last };
};

/** A search of one sandbox's bash events: the repository's query, its sandbox given apart. */
export type BashSearch = Omit<BashEventQuery, "sandboxId">;

/** A page of the sandbox's bash events (orphaned commands ended first, so a poll sees them end). */
export const searchAgentBashEvents = async (deps: WorkerReadDeps, sandboxId: string, q: BashSearch) => {
  await finishOrphanedCommands(deps, sandboxId);
  const page = await bashEventsRepository(deps.db).search({ sandboxId, ...q });
  return { items: page.items.map(bashEventJson), next_page_id: page.nextPageId };
};

export const getAgentBashEvent = async (deps: WorkerReadDeps, sandboxId: string, eventId: string) => {
  const id = parseId(eventId);
  if (!id) return null;
  await finishOrphanedCommands(deps, sandboxId);
  const event = await bashEventsRepository(deps.db).get(sandboxId, id);
  return event ? bashEventJson(event) : null;
};

/** The last output of a command (what execute_bash_command answers). */
export const lastAgentBashOutput = async (deps: WorkerReadDeps, sandboxId: string, commandId: string) => {
  const page = await bashEventsRepository(deps.db).search({
    sandboxId,
    commandId,
    kind: "BashOutput",
    desc: true,
    limit: 1,
  });
  const last = page.items[0];
  return last ? bashEventJson(last) : null;
};

export const clearAgentBashEvents = (deps: Pick<WorkerReadDeps, "db">, sandboxId: string) =>
  bashEventsRepository(deps.db).clear(sandboxId);

// ---------------------------------------------------------------------------------------------
// files and git

/** Writes the upload's bytes to `path` in the sandbox, streamed; past `maxBytes` PayloadTooLargeError. */
export const uploadAgentFile = async (
  deps: WorkerReadDeps,
  sandboxId: string,
  path: string,
  body: ReadableStream<Uint8Array>,
  maxBytes: number,
): Promise<void> => {
  const sandbox = await runningSandbox(deps, sandboxId);
  const res = await callWorker(deps, sandbox, "upload", { path, max: maxBytes }, { body, timeoutMs: 10 * 60_000 });
  await res.body?.cancel();
};

/** A file of the sandbox, its body streamed from the worker. */
export const downloadAgentFile = async (deps: WorkerReadDeps, sandboxId: string, path: string): Promise<Response> => {
  const sandbox = await runningSandbox(deps, sandboxId);
  return callWorker(deps, sandbox, "download", { path }, { stream: true });
};

export const agentGitChanges = async (deps: WorkerReadDeps, sandboxId: string, path: string, ref?: string) => {
  const sandbox = await runningSandbox(deps, sandboxId);
  return workerResult("gitChanges", await callWorker(deps, sandbox, "gitChanges", { path, ref }));
};

export const agentGitDiff = async (deps: WorkerReadDeps, sandboxId: string, path: string, ref?: string) => {
  const sandbox = await runningSandbox(deps, sandboxId);
  return workerResult("gitDiff", await callWorker(deps, sandbox, "gitDiff", { path, ref }));
};
