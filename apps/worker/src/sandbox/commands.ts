import { commandRefusalOf, type Logger, type Sandbox } from "@tern/core";
import { agentRunsRepository, conversationsRepository, type Database, sandboxesRepository } from "@tern/db";
import { promoteAgentRun, type Queues, type SandboxCommandResult } from "@tern/queue";
import { type SandboxDriver, sandboxFaultOf } from "@tern/sandbox";
import type { Kysely, Transaction } from "kysely";

/**
 * The commands that change a sandbox, as the `sandbox` queue's processors run them. Each runs
 * holding the sandbox row's lock, so two commands on one sandbox (taken by two workers) happen one
 * after the other and the row's status always says what the driver did. Each is idempotent: a
 * second pause of a paused sandbox, or a retry after a crash between the driver call and the row
 * write, ends in the same state. A refusal (removed, still starting) is a result, not a failure.
 */
export interface SandboxCommandDeps {
  db: Kysely<Database>;
  sandboxes: Pick<SandboxDriver, "pause" | "resume" | "destroy" | "inspect">;
  logger: Logger;
}

const refOf = (row: Sandbox) => row.ref ?? row.name;

/**
 * A driver call failed: when the sandbox has vanished underneath (removed behind our back, or
 * broken for good), the row says so and the command is refused as `gone`; any other failure is
 * passing and is retried.
 */
const unlessVanished = async (
  deps: SandboxCommandDeps,
  trx: Transaction<Database>,
  row: Sandbox,
  err: unknown,
): Promise<SandboxCommandResult> => {
  if ((await sandboxFaultOf(deps.sandboxes, refOf(row))) !== "gone") throw err;
  await sandboxesRepository(trx).update(row.id, { status: "MISSING" });
  deps.logger.warn({ sandbox_id: row.id }, "the sandbox had vanished; marked MISSING");
  return { outcome: "gone" };
};

/** Freezes the sandbox; the run of its conversation sees PAUSED and waits. */
export const freezeSandbox = (deps: SandboxCommandDeps, sandboxId: string): Promise<SandboxCommandResult> =>
  sandboxesRepository(deps.db).withLock(sandboxId, async (row, trx) => {
    if (!row) return { outcome: "missing" };
    const refusal = commandRefusalOf(row.status);
    if (refusal) return { outcome: refusal };
    try {
      // Even when the row says PAUSED: a sandbox left running by a crash is frozen now.
      await deps.sandboxes.pause(refOf(row));
    } catch (err) {
      return unlessVanished(deps, trx, row, err);
    }
    // The user's pause now, not the janitor's (idle_paused_at cleared): no run resumes it but the user's resume.
    if (row.status !== "PAUSED" || row.idlePausedAt) {
      await sandboxesRepository(trx).update(row.id, { status: "PAUSED", idlePausedAt: null });
    }
    deps.logger.info({ sandbox_id: row.id }, "sandbox paused");
    return { outcome: "done", status: "PAUSED" };
  });

/**
 * Thaws the sandbox, then hurries the run that waited for it: the delayed job of the run holding
 * the conversation is promoted, so the same run continues now rather than at its next look.
 */
export const thawSandbox = async (
  deps: SandboxCommandDeps & { queues: Queues; engineId?: string | null },
  sandboxId: string,
): Promise<SandboxCommandResult> => {
  const result = await sandboxesRepository(deps.db).withLock(
    sandboxId,
    async (row, trx): Promise<SandboxCommandResult & { conversationId?: string | null }> => {
      if (!row) return { outcome: "missing" };
      const refusal = commandRefusalOf(row.status);
      if (refusal) return { outcome: refusal };
      try {
        await deps.sandboxes.resume(refOf(row));
      } catch (err) {
        return unlessVanished(deps, trx, row, err);
      }
      if (row.status !== "RUNNING" || row.idlePausedAt) {
        await sandboxesRepository(trx).update(row.id, { status: "RUNNING", idlePausedAt: null });
      }
      deps.logger.info({ sandbox_id: row.id }, "sandbox resumed");
      return { outcome: "done", status: "RUNNING", conversationId: row.conversationId };
    },
  );
  // After the commit, so the run that wakes reads RUNNING.
  if (result.outcome === "done" && result.conversationId) {
    const runId = await agentRunsRepository(deps.db).activeRun(result.conversationId);
    if (runId && (await promoteAgentRun(deps.queues, result.conversationId, runId, deps.engineId ?? null))) {
      deps.logger.info({ conversation_id: result.conversationId, run_id: runId }, "the waiting run continues");
    }
  }
  const { conversationId: _conversationId, ...answer } = result as SandboxCommandResult & { conversationId?: unknown };
  return answer;
};

/**
 * Stops and removes the sandbox and marks its row MISSING (a failed start's stays ERROR); the
 * conversation's record and events stay. A run still working on the conversation finds the
 * sandbox MISSING at its next tool call and ends in `error`.
 */
export const destroySandbox = (deps: SandboxCommandDeps, sandboxId: string): Promise<SandboxCommandResult> =>
  sandboxesRepository(deps.db).withLock(sandboxId, async (row, trx) => {
    if (!row) return { outcome: "missing" };
    await deps.sandboxes.destroy(refOf(row));
    const status = row.status === "ERROR" ? "ERROR" : "MISSING";
    if (row.status !== status) await sandboxesRepository(trx).update(row.id, { status });
    deps.logger.info({ sandbox_id: row.id, conversation_id: row.conversationId }, "sandbox removed");
    return { outcome: "done", status };
  });

/** Removes a conversation's sandbox (DELETE /app-conversations/{id}); none is not an error. */
export const removeConversationSandbox = async (
  deps: SandboxCommandDeps,
  conversationId: string,
): Promise<SandboxCommandResult> => {
  const conversation = await conversationsRepository(deps.db).get(conversationId);
  if (!conversation?.sandboxId) return { outcome: "missing" };
  return destroySandbox(deps, conversation.sandboxId);
};
