import { buildSystemPrompt, systemPromptTools } from "@tern/agent";
import { type Conversation, type Logger, newId, startPeriodicTask, toHexId } from "@tern/core";
import { type Database, sandboxesRepository, WARM_ROW_FRESH_MS, warmSandboxesRepository } from "@tern/db";
import { type SandboxInfo, SandboxLabel, type WarmPoolStore } from "@tern/sandbox";
import type { Kysely } from "kysely";
import { sandboxLimitsOf } from "../config.ts";
import type { WorkerDeps } from "../deps.ts";
import { EMPTY_WORKSPACE, emptyWorkspaceWarmUp } from "../pipeline/prepare-repository.ts";

/**
 * The worker's pool as rows: each warm sandbox it makes is a warm_sandboxes row the
 * API may claim in a start's transaction. The row carries what that start needs and the API
 * cannot make without an engine or the agent package: the empty workspace's path and the system
 * prompt for it (no repository, so no skills: the same text whatever the model).
 */
export const warmPoolStore = (opts: {
  db: Kysely<Database>;
  ownerId: string;
  engineId: string | null;
  image: string;
  llmModel: string | null;
}): WarmPoolStore => {
  const rows = warmSandboxesRepository(opts.db);
  const systemPrompt = {
    text: buildSystemPrompt({ workspaceDir: EMPTY_WORKSPACE, repository: null, skills: [] }),
    tools: systemPromptTools(),
  };
  return {
    add: (info: SandboxInfo) =>
      rows.add({
        // The id its sandboxes row gets when claimed.
        id: newId(),
        name: info.name,
        ref: info.ref,
        engineId: opts.engineId,
        image: opts.image,
        spec: opts.image,
        ownerWorker: opts.ownerId,
        workspaceDir: EMPTY_WORKSPACE,
        systemPrompt,
        llmModel: opts.llmModel,
      }),
    take: (info) => rows.take(info.name),
    unclaimed: () => rows.unclaimedOf(opts.ownerId),
    touch: (names) => rows.touch(opts.ownerId, names),
    removeAll: () => rows.removeUnclaimedOf(opts.ownerId),
  };
};

/** The heartbeat renews the rows' health more often than a claim's freshness window runs out. */
export const WARM_TOUCH_EVERY_MS = Math.floor(WARM_ROW_FRESH_MS / 3);

/**
 * Before an agent run's first step on a sandbox a start's transaction claimed: that claim read a
 * row, not the engine, so the run's first exec is the proof the container lives. One that does not
 * answer (killed, OOM, its engine restarted) is replaced by a fresh sandbox with the same empty
 * workspace under the same sandbox id: the conversation keeps its events and no client sees an
 * error. Either way the claimed row has done its work and goes.
 */
export const replaceDeadClaimedSandbox = async (
  deps: Pick<WorkerDeps, "db" | "sandboxes" | "config" | "engineId">,
  conversation: Conversation,
  log: Logger,
): Promise<void> => {
  if (!conversation.sandboxId) return;
  const warm = warmSandboxesRepository(deps.db);
  const claimed = await warm.claimedUnchecked(conversation.sandboxId);
  if (!claimed) return;
  const sandboxes = sandboxesRepository(deps.db);
  const row = await sandboxes.get(conversation.sandboxId);
  if (row?.status !== "RUNNING") {
    await warm.remove(claimed.id);
    return;
  }
  const ref = row.ref ?? row.name;
  const alive = await deps.sandboxes.exec(ref, { cmd: ["true"], timeoutMs: 30_000 }).then(
    (r) => r.exitCode === 0,
    () => false,
  );
  if (!alive) {
    // Gone or stopped: whatever is left of it goes, and a fresh one of its own name takes its place.
    await deps.sandboxes.destroy(ref).catch(() => undefined);
    const info = await freshSandbox(deps, conversation, row.id);
    await sandboxes.update(row.id, { ref: info.ref, name: info.name, status: "RUNNING" });
    log.warn(
      { sandbox_id: row.id, dead: row.name, fresh: info.name },
      "the claimed warm sandbox was dead; the conversation moved to a fresh one",
    );
  }
  await warm.remove(claimed.id);
};

const freshSandbox = async (
  deps: Pick<WorkerDeps, "sandboxes" | "config" | "engineId">,
  conversation: Conversation,
  sandboxId: string,
): Promise<SandboxInfo> => {
  const { config } = deps;
  const info = await deps.sandboxes.create({
    name: `tern-sbx-${toHexId(sandboxId)}-${Date.now().toString(36)}`,
    image: config.SANDBOX_IMAGE,
    labels: {
      [SandboxLabel.Marker]: "1",
      [SandboxLabel.Namespace]: config.REDIS_PREFIX,
      [SandboxLabel.SandboxId]: sandboxId,
      [SandboxLabel.ConversationId]: conversation.id,
      ...(conversation.startTaskId ? { [SandboxLabel.TaskId]: conversation.startTaskId } : {}),
      ...(deps.engineId ? { [SandboxLabel.Engine]: deps.engineId } : {}),
    },
    limits: sandboxLimitsOf(config),
  });
  const r = await deps.sandboxes.exec(info.ref, emptyWorkspaceWarmUp());
  if (r.exitCode !== 0) {
    await deps.sandboxes.destroy(info.ref).catch(() => undefined);
    throw new Error(`the replacement sandbox's workspace could not be made (exit ${r.exitCode})`);
  }
  return info;
};

/**
 * On every worker: drops warm rows whose owner stopped checking them (its worker is gone), and
 * claimed rows no run looked at.
 */
export const startWarmUpkeep = (
  deps: Pick<WorkerDeps, "db" | "logger">,
  everyMs = 60_000,
): { stop: () => Promise<void> } =>
  startPeriodicTask("warm upkeep", () => warmSandboxesRepository(deps.db).removeStale(10 * WARM_ROW_FRESH_MS), {
    everyMs,
    logger: deps.logger,
  });
