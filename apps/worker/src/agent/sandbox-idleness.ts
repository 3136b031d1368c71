import type { Conversation, Logger } from "@tern/core";
import {
  type Database,
  type RetirableSandbox,
  type RetireCondition,
  type SandboxesRepository,
  sandboxesRepository,
} from "@tern/db";
import { type SandboxDriver, sandboxFaultOf } from "@tern/sandbox";
import type { Kysely } from "kysely";

interface IdlenessDeps {
  db: Kysely<Database>;
  /** The janitor's engine: it pauses and removes that engine's sandboxes only (null: no affinity). */
  engineId?: string | null;
  sandboxes: Pick<SandboxDriver, "pause" | "resume" | "destroy" | "inspect">;
  logger: Logger;
}

/**
 * Does `act` to the sandbox while its conversation's row is locked, if it still qualifies (the
 * lock and the check are one statement), then records the outcome in the same transaction. A run
 * that begins meanwhile waits for the row and then sees the new state; one that began first holds
 * the conversation, and the sandbox is left alone.
 */
const retire = (
  deps: IdlenessDeps,
  candidate: RetirableSandbox,
  when: RetireCondition,
  act: () => Promise<void>,
  record: (repo: SandboxesRepository) => Promise<void>,
): Promise<boolean> =>
  deps.db.transaction().execute(async (trx) => {
    const repo = sandboxesRepository(trx);
    if (!(await repo.lockRetirable(candidate.sandboxId, when))) return false;
    await act();
    await record(repo);
    return true;
  });

/**
 * Janitor step: conversations without events or runs for SANDBOX_IDLE_PAUSE seconds get their
 * sandbox paused (frozen: no CPU, and whatever it left running stops), PAUSED for their clients.
 * The next agent run resumes it (ensureSandboxRunning). 0 turns the step off.
 */
export const pauseIdleSandboxes = async (deps: IdlenessDeps, idleSeconds: number): Promise<string[]> => {
  if (idleSeconds <= 0) return [];
  const before = new Date(Date.now() - idleSeconds * 1000);
  const paused: string[] = [];
  for (const c of await sandboxesRepository(deps.db).listIdle(before, deps.engineId ?? null)) {
    try {
      const done = await retire(
        deps,
        c,
        { statuses: ["RUNNING"], idleBefore: before },
        () => deps.sandboxes.pause(c.ref),
        (repo) => repo.markIdlePaused(c.sandboxId),
      );
      if (!done) continue;
      deps.logger.info(
        { conversation_id: c.conversationId, sandbox_id: c.sandboxId },
        "janitor paused an idle sandbox",
      );
      paused.push(c.sandboxId);
    } catch (err) {
      // One sandbox the engine cannot pause (gone, another host's) must not stop the sweep.
      deps.logger.warn({ err, conversation_id: c.conversationId, sandbox_id: c.sandboxId }, "idle pause failed");
    }
  }
  return paused;
};

/**
 * Janitor step: sandboxes older than SANDBOX_MAX_AGE seconds are removed once no run works in
 * them (a run is never cut short; the sandbox goes at the first sweep after it). The conversation
 * and its events stay, its sandbox_status MISSING: the agent cannot run in it any more. 0 turns
 * the step off.
 */
export const removeAgedSandboxes = async (deps: IdlenessDeps, maxAgeSeconds: number): Promise<string[]> => {
  if (maxAgeSeconds <= 0) return [];
  const before = new Date(Date.now() - maxAgeSeconds * 1000);
  const removed: string[] = [];
  for (const c of await sandboxesRepository(deps.db).listAged(before, deps.engineId ?? null)) {
    try {
      const done = await retire(
        deps,
        c,
        { statuses: ["STARTING", "RUNNING", "PAUSED"], createdBefore: before },
        () => deps.sandboxes.destroy(c.ref),
        (repo) => repo.update(c.sandboxId, { status: "MISSING" }),
      );
      if (!done) continue;
      deps.logger.info(
        { conversation_id: c.conversationId, sandbox_id: c.sandboxId },
        "janitor removed an old sandbox",
      );
      removed.push(c.sandboxId);
    } catch (err) {
      deps.logger.warn(
        { err, conversation_id: c.conversationId, sandbox_id: c.sandboxId },
        "old sandbox removal failed",
      );
    }
  }
  return removed;
};

/**
 * Before an agent run's first step: a sandbox the janitor paused for idleness is resumed (a pause
 * the user asked for is theirs to undo). One that cannot be resumed because it is gone is marked
 * MISSING, and the run ends saying so when it needs the sandbox.
 */
export const ensureSandboxRunning = async (deps: IdlenessDeps, conversation: Conversation): Promise<void> => {
  if (!conversation.sandboxId) return;
  const repo = sandboxesRepository(deps.db);
  const sandbox = await repo.get(conversation.sandboxId);
  if (sandbox?.status !== "PAUSED" || !sandbox.idlePausedAt) return;
  const ref = sandbox.ref ?? sandbox.name;
  try {
    await deps.sandboxes.resume(ref);
  } catch (err) {
    if ((await sandboxFaultOf(deps.sandboxes, ref)) !== "gone") throw err;
    await repo.update(sandbox.id, { status: "MISSING" });
    deps.logger.warn({ err, conversation_id: conversation.id }, "an idle-paused sandbox was gone when resumed");
    return;
  }
  await repo.markResumedFromIdle(sandbox.id);
  deps.logger.info(
    { conversation_id: conversation.id, sandbox_id: sandbox.id },
    "resumed a sandbox paused for idleness",
  );
};
