import { healthMetrics, isSandboxGone, type Logger, newEvent } from "@tern/core";
import {
  agentRunsRepository,
  type Database,
  eventsRepository,
  sandboxesRepository,
  startTasksRepository,
} from "@tern/db";
import { type DiskWatch, type SandboxDriver, type SandboxInfo, SandboxLabel, startDiskWatch } from "@tern/sandbox";
import type { Kysely } from "kysely";

export interface DiskLimitDeps {
  db: Kysely<Database>;
  sandboxes: Pick<SandboxDriver, "list" | "writtenBytes" | "pause" | "containmentState">;
  logger: Logger;
}

const MiB = 1024 * 1024;
const GiB = 1024 * MiB;

const sizeOf = (bytes: number) => (bytes >= GiB ? `${(bytes / GiB).toFixed(2)} GiB` : `${Math.round(bytes / MiB)} MiB`);

/** What the conversation is told: the limit, the size, what happened and what is kept. */
const diskLimitMessage = (
  bytes: number,
  limitMb: number,
  ended = "this run is ended. The conversation and its events are kept.",
) =>
  `The sandbox wrote ${sizeOf(bytes)} to its disk, past its limit of ${limitMb} MB (SANDBOX_DISK_MB): ` +
  `it is paused so that it writes no more, and ${ended}`;

/**
 * Stops a sandbox that wrote past the watched limit: paused as a user's pause is (no run resumes
 * it), its conversation's run ended with an AgentErrorEvent naming the limit and the size (with
 * no run in progress, the event alone). Holding the sandbox row's lock, as every command on a
 * sandbox does; a sandbox already paused under it was stopped by another worker, and is left.
 */
const stopOverDiskLimit = async (
  deps: DiskLimitDeps,
  sandbox: SandboxInfo,
  sampled: number,
  limitMb: number,
): Promise<void> => {
  const log = deps.logger.child({ sandbox: sandbox.name });
  // Frozen first, before any bookkeeping: every moment it runs it may write at full speed. Pausing
  // is idempotent, so doing it again under the row's lock below changes nothing.
  await deps.sandboxes.pause(sandbox.ref);
  // What it holds once frozen, for the message: the sample that found it past the limit is older.
  const bytes = Math.max(sampled, (await deps.sandboxes.writtenBytes?.(sandbox.ref).catch(() => null)) ?? 0);
  const row = await sandboxesRepository(deps.db).findByName(sandbox.name);
  if (!row) {
    // Not a conversation's (a warm one, which runs nothing): left frozen.
    log.warn({ bytes, limit_mb: limitMb }, "sandbox past its disk limit paused");
    healthMetrics.sandboxDiskStops.inc();
    return;
  }
  const conversationId = await sandboxesRepository(deps.db).withLock(row.id, async (locked, trx) => {
    if (!locked || isSandboxGone(locked.status)) return null;
    // Even when the row says PAUSED: it was seen running, and writing.
    await deps.sandboxes.pause(sandbox.ref);
    // Paused already by the user or another worker's watch: the conversation was told.
    if (locked.status === "PAUSED" && !locked.idlePausedAt) return null;
    await sandboxesRepository(trx).update(locked.id, { status: "PAUSED", idlePausedAt: null });
    return locked.conversationId ?? "";
  });
  if (conversationId === null) return;
  healthMetrics.sandboxDiskStops.inc();
  log.warn(
    { sandbox_id: row.id, conversation_id: conversationId || null, bytes, limit_mb: limitMb },
    "sandbox past its disk limit paused",
  );
  if (!conversationId) {
    // Still starting (a setup script wrote it full): the repository's fault, so the start ends in
    // ERROR at once, and its sandbox goes as every failed start's does (the janitor removes it).
    if (row.startTaskId) {
      const task = await startTasksRepository(deps.db).get(row.startTaskId);
      const detail = `${task?.status ?? "WORKING"}: ${diskLimitMessage(bytes, limitMb, "the start is ended")}`;
      await startTasksRepository(deps.db).markError(row.startTaskId, detail);
    }
    return;
  }
  const error = newEvent.agentError(diskLimitMessage(bytes, limitMb));
  const runs = agentRunsRepository(deps.db);
  const runId = await runs.activeRun(conversationId);
  if (runId && (await runs.abandon(conversationId, runId, [error]))) return;
  await eventsRepository(deps.db).append(conversationId, [error]);
};

/**
 * The watched disk limit, when the driver's containment says the backend cannot hold one: this
 * worker samples the running sandboxes of its deployment on its engine and stops the ones past
 * the limit. Null in the other modes (hard: the engine holds it; off: none asked for).
 */
export const startDiskLimitWatch = (
  deps: DiskLimitDeps,
  opts: { namespace: string; writeMbps: number },
): DiskWatch | null => {
  const disk = deps.sandboxes.containmentState?.().disk;
  if (disk?.mode !== "watched" || !disk.limitMb) return null;
  const limitMb = disk.limitMb;
  return startDiskWatch({
    driver: deps.sandboxes,
    labels: { [SandboxLabel.Marker]: "1", [SandboxLabel.Namespace]: opts.namespace },
    limitBytes: limitMb * MiB,
    writeBytesPerSecond: opts.writeMbps * 1_000_000,
    onOver: (sandbox, bytes) => stopOverDiskLimit(deps, sandbox, bytes, limitMb),
    onSample: (ms) => healthMetrics.sandboxDiskSamples.observe(ms / 1000),
    onError: (err) => deps.logger.warn({ err }, "disk limit watch: a sample failed"),
  });
};
