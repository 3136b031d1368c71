import { randomUUID } from "node:crypto";
import {
  type ConversationMetrics,
  type EventDraft,
  EventLimitError,
  type ExecutionStatus,
  newEvent,
  type StoredEvent,
} from "@tern/core";
import { type Kysely, sql, type Transaction } from "kysely";
import type { Database } from "../schema.ts";
import { eventsRepository } from "./events.ts";
import { emptyMetrics, type MetricsChange, metricsChange } from "./metrics.ts";
import { stepWriterOf } from "./step-writer.ts";

export type { MetricsChange } from "./metrics.ts";

/** What a run holds while it works: its id and the attempt that took it (a fencing token). */
export interface RunLease {
  conversationId: string;
  runId: string;
  attempt: number;
}

export type BeginRunResult =
  | { outcome: "started" | "resumed"; lease: RunLease; events: StoredEvent[] }
  | { outcome: "busy"; activeRunId: string }
  /** This run already ended (BullMQ delivered its job again): nothing to do. */
  | { outcome: "ended" }
  /** Tool calls wait for the user's answer (confirmation mode): no run may begin until it comes. */
  | { outcome: "waiting_for_confirmation" }
  | { outcome: "missing" };

/** A run asked for: its row is written; its job, a copy of it, is added after the commit. */
export interface RequestedRun {
  conversationId: string;
  runId: string;
  /** The engine whose queue the run's job goes to (null: the shared queue). */
  engineId: string | null;
}

/** A run that has not ended, as the janitor's sweep reads it to find those whose job Redis lost. */
export interface OpenRun extends RequestedRun {
  status: string;
  requestedAt: string;
}

/** The run lock was taken by someone else (another run, or a newer attempt of this one). */
export class RunLeaseLostError extends Error {
  constructor(lease: RunLease) {
    super(`run ${lease.runId} (attempt ${lease.attempt}) no longer holds conversation ${lease.conversationId}`);
    this.name = "RunLeaseLostError";
  }
}

/**
 * The run lock of a conversation (never two agent runs at once) and the writes a run makes under it.
 * Every write locks the conversation row first, the same row the event append serialises on, so
 * a status change and its ConversationStateUpdateEvent are one atomic step: `for update` in the
 * transactions of begin, end and the like; the step append takes it by its own update (one statement).
 */
export const agentRunsRepository = (db: Kysely<Database>) => {
  const lockRow = (trx: Transaction<Database>, conversationId: string) =>
    trx
      .selectFrom("conversations")
      .select(["id", "active_run_id", "run_attempt", "execution_status"])
      .where("id", "=", conversationId)
      .forUpdate()
      .executeTakeFirst();

  const holds = (row: { active_run_id: string | null; run_attempt: number } | undefined, lease: RunLease) =>
    !!row && row.active_run_id === lease.runId && row.run_attempt === lease.attempt;

  const finishRun = (trx: Transaction<Database>, runId: string, status: ExecutionStatus) =>
    trx
      .updateTable("agent_runs")
      .set({ status, ended_at: sql<string>`clock_timestamp()` })
      .where("id", "=", runId)
      .execute();

  const setStatus = (trx: Transaction<Database>, conversationId: string, status: ExecutionStatus, release: boolean) =>
    trx
      .updateTable("conversations")
      .set({
        execution_status: status,
        ...(release ? { active_run_id: null } : {}),
        updated_at: sql<string>`clock_timestamp()`,
      })
      .where("id", "=", conversationId)
      .execute();

  /**
   * One agent step's writes: its events, in order, and the LLM usage it adds to the conversation's
   * metrics, all or nothing. The lease is checked by the append statement itself, under the row
   * lock its update of the conversation takes (one row lock, one multi-row insert, one last_seq
   * update; one NOTIFY at commit). The steps of all the process's runs that arrive together share
   * one statement and one commit (group commit, step-writer.ts); each caller resumes once its own
   * step is committed. A superseded attempt's step writes nothing, metrics included
   * (RunLeaseLostError), and its neighbours in the group commit all the same.
   */
  const appendStep = async (
    lease: RunLease,
    drafts: EventDraft[],
    opts: { maxEvents?: number; metrics?: MetricsChange } = {},
  ): Promise<{ events: StoredEvent[]; metrics: ConversationMetrics }> => {
    if (drafts.length === 0) throw new Error("a step appends at least one event");
    // Outside a transaction, through the process's group commit (step-writer.ts): the same
    // guards, checked per step, with the steps of every run that arrive meanwhile in one commit.
    const done = db.isTransaction
      ? await eventsRepository(db).appendGuarded(lease.conversationId, drafts, {
          lease,
          maxEvents: opts.maxEvents,
          metrics: opts.metrics && metricsChange(opts.metrics),
        })
      : await stepWriterOf(db).write({
          conversationId: lease.conversationId,
          lease,
          drafts,
          maxEvents: opts.maxEvents,
          metrics: opts.metrics,
        });
    if (done) return { events: done.events, metrics: { ...emptyMetrics, ...done.metrics } };
    // Refused: say why. A lost lease never comes back (attempts only grow), and events only
    // accumulate, so what this read finds is why the statement wrote nothing.
    const row = await db
      .selectFrom("conversations")
      .select(["active_run_id", "run_attempt"])
      .where("id", "=", lease.conversationId)
      .executeTakeFirst();
    if (!holds(row, lease)) throw new RunLeaseLostError(lease);
    throw new EventLimitError(opts.maxEvents ?? 0);
  };

  return {
    /**
     * Asks for a run, in the caller's transaction (the one that writes what asks for it: a start's
     * first message, a follow-up, a `run` call): a `queued` row, from whose commit on the run is
     * owed whatever Redis keeps. The id is the caller's when the same request may be made twice (a
     * start's first run is the conversation's own id): a second request of it writes nothing.
     */
    async request(run: { conversationId: string; runId?: string; engineId: string | null }): Promise<RequestedRun> {
      const runId = run.runId ?? randomUUID();
      await sql`select tern_request_run(${run.conversationId}::uuid, ${runId}::uuid, ${run.engineId})`.execute(db);
      return { conversationId: run.conversationId, runId, engineId: run.engineId };
    },

    /**
     * Runs not ended that were asked for before `requestedBefore` (agent_runs_open_idx), oldest
     * first, of every conversation or of one: the janitor looks for each one's job.
     */
    async open(requestedBefore: Date, opts: { conversationId?: string; limit?: number } = {}): Promise<OpenRun[]> {
      let q = db
        .selectFrom("agent_runs")
        .select(["id", "conversation_id", "engine_id", "status", "requested_at"])
        .where("ended_at", "is", null)
        .where("requested_at", "<", requestedBefore.toISOString());
      if (opts.conversationId) q = q.where("conversation_id", "=", opts.conversationId);
      const rows = await q
        .orderBy("requested_at")
        .limit(opts.limit ?? 500)
        .execute();
      return rows.map((r) => ({
        conversationId: r.conversation_id,
        runId: r.id,
        engineId: r.engine_id,
        status: r.status,
        requestedAt: r.requested_at,
      }));
    },

    /**
     * A run that never began and will not (nothing to answer, the conversation waits for a
     * confirmation): its row ends `skipped`. A run that began ends through `end` or `abandon`.
     */
    async skip(runId: string): Promise<void> {
      await db
        .updateTable("agent_runs")
        .set({ status: "skipped", ended_at: sql<string>`clock_timestamp()` })
        .where("id", "=", runId)
        .where("started_at", "is", null)
        .where("ended_at", "is", null)
        .execute();
    },

    /**
     * Takes the run lock for `runId`. A free lock: status `running` (with its event) and "started".
     * Held by the same run (its worker died and BullMQ handed the job on): a new attempt, "resumed".
     * Held by another run: "busy", nothing written.
     */
    async begin(conversationId: string, runId: string): Promise<BeginRunResult> {
      return db.transaction().execute(async (trx) => {
        const row = await lockRow(trx, conversationId);
        if (!row) return { outcome: "missing" } as const;
        if (row.active_run_id && row.active_run_id !== runId) {
          return { outcome: "busy", activeRunId: row.active_run_id } as const;
        }
        const run = await trx.selectFrom("agent_runs").select("ended_at").where("id", "=", runId).executeTakeFirst();
        if (run?.ended_at) return { outcome: "ended" } as const;
        // Checked under the row lock the answer takes too: a run never runs what nobody accepted.
        if (row.execution_status === "waiting_for_confirmation")
          return { outcome: "waiting_for_confirmation" } as const;
        const attempt = row.run_attempt + 1;
        const resumed = row.active_run_id === runId;
        await trx
          .updateTable("conversations")
          .set({ active_run_id: runId, run_attempt: attempt, updated_at: sql<string>`clock_timestamp()` })
          .where("id", "=", conversationId)
          .execute();
        // A requested run's row (queued) is taken; a job with no row (added by hand) gets one.
        await trx
          .insertInto("agent_runs")
          .values({
            id: runId,
            conversation_id: conversationId,
            status: "running",
            attempts: 1,
            started_at: sql<string>`clock_timestamp()`,
          })
          .onConflict((oc) =>
            oc.column("id").doUpdateSet({
              status: "running",
              attempts: sql<number>`agent_runs.attempts + 1`,
              started_at: sql<string>`coalesce(agent_runs.started_at, clock_timestamp())`,
            }),
          )
          .execute();
        const events = resumed
          ? []
          : await eventsRepository(trx).append(conversationId, [newEvent.executionStatus("running")]);
        if (!resumed) await setStatus(trx, conversationId, "running", false);
        return {
          outcome: resumed ? "resumed" : "started",
          lease: { conversationId, runId, attempt },
          events,
        } as const;
      });
    },

    /**
     * Appends events as the lease holder; refused (RunLeaseLostError) when the lease was lost, and
     * (EventLimitError) past `maxEvents`, with nothing written. One statement (appendStep).
     */
    async append(lease: RunLease, drafts: EventDraft[], opts: { maxEvents?: number } = {}): Promise<StoredEvent[]> {
      return (await appendStep(lease, drafts, opts)).events;
    },

    appendStep,

    /**
     * Ends the run: its last events, the final status (with its event), and the lock released; with
     * `metrics`, the LLM usage of the step that ended it (a response whose calls wait for confirmation
     * is stored with `waiting_for_confirmation` in this one transaction: no worker dies between them).
     */
    async end(
      lease: RunLease,
      status: ExecutionStatus,
      drafts: EventDraft[] = [],
      opts: { metrics?: MetricsChange } = {},
    ): Promise<StoredEvent[]> {
      return db.transaction().execute(async (trx) => {
        if (!holds(await lockRow(trx, lease.conversationId), lease)) throw new RunLeaseLostError(lease);
        const events = await eventsRepository(trx).append(lease.conversationId, [
          ...drafts,
          newEvent.executionStatus(status),
        ]);
        if (opts.metrics) {
          await trx
            .updateTable("conversations")
            .set({ metrics: metricsChange(opts.metrics) })
            .where("id", "=", lease.conversationId)
            .execute();
        }
        await setStatus(trx, lease.conversationId, status, true);
        await finishRun(trx, lease.runId, status);
        return events;
      });
    },

    /**
     * Ends a run whose job is given up (attempts spent): the conversation must not stay `running`
     * with nobody working on it. A run that holds no lock (it never began, or another attempt
     * ended it) only has its row ended, if it still is open (false).
     */
    async abandon(conversationId: string, runId: string, drafts: EventDraft[]): Promise<boolean> {
      return db.transaction().execute(async (trx) => {
        const row = await lockRow(trx, conversationId);
        if (!row || row.active_run_id !== runId) {
          await trx
            .updateTable("agent_runs")
            .set({ status: "error", ended_at: sql<string>`clock_timestamp()` })
            .where("id", "=", runId)
            .where("ended_at", "is", null)
            .execute();
          return false;
        }
        await eventsRepository(trx).append(conversationId, [...drafts, newEvent.executionStatus("error")]);
        await setStatus(trx, conversationId, "error", true);
        await finishRun(trx, runId, "error");
        return true;
      });
    },

    /**
     * A PauseEvent from the user. A running run sees it between two steps and stops `paused`;
     * with no run in progress the conversation is `paused` at once.
     */
    /**
     * A PauseEvent (with `interrupt`, an InterruptEvent before it): the run in progress stops at
     * its next step, or at once when its worker hears of the interrupt.
     */
    async requestPause(
      conversationId: string,
      opts: { maxEvents?: number; interrupt?: boolean } = {},
    ): Promise<{ activeRunId: string | null } | null> {
      return db.transaction().execute(async (trx) => {
        const row = await lockRow(trx, conversationId);
        if (!row) return null;
        const drafts: EventDraft[] = [...(opts.interrupt ? [newEvent.interrupt()] : []), newEvent.pause()];
        // Waiting for confirmation, nothing runs: the conversation keeps waiting for the answer
        // (a pause must not let a later run execute what nobody accepted).
        const setPaused =
          !row.active_run_id &&
          row.execution_status !== "paused" &&
          row.execution_status !== "waiting_for_confirmation";
        if (setPaused) drafts.push(newEvent.executionStatus("paused"));
        await eventsRepository(trx).append(conversationId, drafts, opts);
        if (setPaused) await setStatus(trx, conversationId, "paused", false);
        return { activeRunId: row.active_run_id };
      });
    },

    /** Whether `runId` has a row that has not ended (asked for, or going on). */
    async isOpen(runId: string): Promise<boolean> {
      const row = await db
        .selectFrom("agent_runs")
        .select("id")
        .where("id", "=", runId)
        .where("ended_at", "is", null)
        .executeTakeFirst();
      return row !== undefined;
    },

    async activeRun(conversationId: string): Promise<string | null> {
      const row = await db
        .selectFrom("conversations")
        .select("active_run_id")
        .where("id", "=", conversationId)
        .executeTakeFirst();
      return row?.active_run_id ?? null;
    },
  };
};

export type AgentRunsRepository = ReturnType<typeof agentRunsRepository>;
