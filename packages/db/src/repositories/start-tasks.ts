import { newId, type StartRequest, type StartTask, type StartTaskKind, type StartTaskStatus } from "@tern/core";
import { type Kysely, type Selectable, sql, type UpdateObject } from "kysely";
import type { Database, StartTasksTable } from "../schema.ts";
import { writeStartTaskStatusOutbox } from "./webhooks.ts";

/** Runs `fn` in the caller's transaction when `db` is one, else in a new one. */
const inTransaction = <T>(db: Kysely<Database>, fn: (trx: Kysely<Database>) => Promise<T>): Promise<T> =>
  db.isTransaction ? fn(db) : db.transaction().execute(fn);

export const toStartTask = (r: Selectable<StartTasksTable>): StartTask => ({
  id: r.id,
  userId: r.user_id,
  status: r.status as StartTaskStatus,
  detail: r.detail,
  appConversationId: r.app_conversation_id,
  sandboxId: r.sandbox_id,
  agentServerUrl: r.agent_server_url,
  request: r.request as StartRequest,
  attempt: r.attempt,
  stageDurations: r.stage_durations,
  createdAt: r.created_at,
  updatedAt: r.updated_at,
  kind: r.kind === "sandbox" ? "sandbox" : "conversation",
});

const TERMINAL = ["READY", "ERROR"] as const;

/**
 * A start task's `detail` while no worker is alive to take it (the API's worker directory said so
 * when it was accepted); cleared by the first worker that claims it.
 */
export const WAITING_FOR_WORKER = "waiting for a worker";

export const startTaskSortOrders = ["CREATED_AT", "CREATED_AT_DESC", "UPDATED_AT", "UPDATED_AT_DESC"] as const;
export type StartTaskSortOrder = (typeof startTaskSortOrders)[number];

/** The start-task search's and count's filters (OpenHands' names, and the same time windows as conversations). */
export interface StartTaskFilter {
  /** The conversation the task made (app_conversation_id). */
  conversationId?: string;
  /** ISO 8601 with zone. */
  createdAtGte?: string;
  createdAtLt?: string;
  updatedAtGte?: string;
  updatedAtLt?: string;
}

/** The value a task sorts by under `order`, as the keyset cursor keeps it. */
export const startTaskSortKey = (t: StartTask, order: StartTaskSortOrder): string =>
  order.startsWith("UPDATED_AT") ? t.updatedAt : t.createdAt;

/**
 * A finished stage: its duration, and with it `timings`, other figures of that stage kept beside the
 * stages' own keys (the worker's `db:STAGE` and `engine:STAGE` milliseconds, for the bench).
 */
export interface FinishedStage {
  stage: string;
  ms: number;
  timings?: Record<string, number>;
  /**
   * Stages gone through since the last write with no write of their own, because their result was
   * known ahead (a repository snapshot recorded it): entered in stage_history, each with `detail`
   * saying what it was, before the status the write enters.
   */
  passed?: { status: string; detail: string }[];
}

/** Merges one finished stage's duration into stage_durations (nothing when none finished). */
const addDuration = (finished?: FinishedStage) =>
  sql<string>`stage_durations || ${finished ? JSON.stringify({ ...finished.timings, [finished.stage]: finished.ms }) : "{}"}::jsonb`;

/**
 * stage_history with `status` entered now (tern_iso: the API's timestamp format), in the write
 * that enters it: the queue path keeps the same history a warm claim writes, at no extra round trip.
 */
const enterHistory = (status: string, passed: FinishedStage["passed"] = []) => {
  const entries = [
    ...passed.map(
      (p) =>
        sql`jsonb_build_object('status', ${p.status}::text, 'at', tern_iso(clock_timestamp()), 'detail', ${p.detail}::text)`,
    ),
    sql`jsonb_build_object('status', ${status}::text, 'at', tern_iso(clock_timestamp()))`,
  ];
  return sql<string>`stage_history || jsonb_build_array(${sql.join(entries)})`;
};

export const startTasksRepository = (db: Kysely<Database>) => {
  /**
   * The one write path of a running start: it only lands while `attempt` (the fencing token)
   * still owns the task and the task is not finished. False when it was refused.
   */
  const fencedUpdate = async (
    id: string,
    attempt: number,
    set: UpdateObject<Database, "start_tasks">,
    passed?: FinishedStage["passed"],
  ) => {
    if (set.status !== undefined) {
      // A status change: its webhook outbox rows commit with it.
      return inTransaction(db, async (trx) => {
        const row = await trx
          .updateTable("start_tasks")
          .set({
            ...set,
            stage_history: enterHistory(String(set.status), passed),
            updated_at: sql<string>`clock_timestamp()`,
          })
          .where("id", "=", id)
          .where("attempt", "=", attempt)
          .where("status", "not in", TERMINAL)
          .returningAll()
          .executeTakeFirst();
        if (row) await writeStartTaskStatusOutbox(trx, row.id);
        return row !== undefined;
      });
    }
    const res = await db
      .updateTable("start_tasks")
      .set({ ...set, updated_at: sql<string>`clock_timestamp()` })
      .where("id", "=", id)
      .where("attempt", "=", attempt)
      .where("status", "not in", TERMINAL)
      .executeTakeFirst();
    return res.numUpdatedRows > 0n;
  };

  const filtered = (userId: string, f: StartTaskFilter) => {
    // A sandbox's own start (POST /api/v1/sandboxes) is no conversation's: the start-task routes never list it.
    let q = db.selectFrom("start_tasks").where("user_id", "=", userId).where("kind", "=", "conversation");
    if (f.conversationId !== undefined) q = q.where("app_conversation_id", "=", f.conversationId);
    if (f.createdAtGte !== undefined) q = q.where("created_at", ">=", sql<string>`${f.createdAtGte}::timestamptz`);
    if (f.createdAtLt !== undefined) q = q.where("created_at", "<", sql<string>`${f.createdAtLt}::timestamptz`);
    if (f.updatedAtGte !== undefined) q = q.where("updated_at", ">=", sql<string>`${f.updatedAtGte}::timestamptz`);
    if (f.updatedAtLt !== undefined) q = q.where("updated_at", "<", sql<string>`${f.updatedAtLt}::timestamptz`);
    return q;
  };

  return {
    async create(
      userId: string,
      request: StartRequest,
      id: string = newId(),
      kind: StartTaskKind = "conversation",
    ): Promise<StartTask> {
      return inTransaction(db, async (trx) => {
        const row = await trx
          .insertInto("start_tasks")
          .values({
            id,
            user_id: userId,
            status: "WORKING",
            request: JSON.stringify(request),
            kind,
            stage_history: sql<string>`jsonb_build_array(jsonb_build_object('status', 'WORKING', 'at', tern_iso(now())))`,
          })
          .returningAll()
          .executeTakeFirstOrThrow();
        await writeStartTaskStatusOutbox(trx, row.id);
        return toStartTask(row);
      });
    },

    async get(id: string): Promise<StartTask | null> {
      const row = await db.selectFrom("start_tasks").selectAll().where("id", "=", id).executeTakeFirst();
      return row ? toStartTask(row) : null;
    },

    /**
     * The caller's tasks among `ids` (any order); foreign and unknown ids are simply absent, and so
     * are sandboxes' own starts (kind "sandbox"), which are no conversation's.
     */
    async findForUser(userId: string, ids: string[]): Promise<StartTask[]> {
      if (ids.length === 0) return [];
      const rows = await db
        .selectFrom("start_tasks")
        .selectAll()
        .where("user_id", "=", userId)
        .where("id", "in", ids)
        .where("kind", "=", "conversation")
        .execute();
      return rows.map(toStartTask);
    },

    /**
     * The caller's tasks matching `filter`, in `order`, keyset-paged after the (sort key, id) of the
     * last one seen (start_tasks_user_created_idx / _updated_idx). Returns up to `limit` + 1 rows so
     * the caller knows if more follow.
     */
    async searchForUser(
      userId: string,
      opts: {
        limit: number;
        filter?: StartTaskFilter;
        order?: StartTaskSortOrder;
        after?: { key: string; id: string } | null;
      },
    ): Promise<StartTask[]> {
      const order = opts.order ?? "CREATED_AT_DESC";
      const dir = order.endsWith("_DESC") ? "desc" : "asc";
      const col = order.startsWith("UPDATED_AT") ? "updated_at" : "created_at";
      let q = filtered(userId, opts.filter ?? {}).selectAll();
      if (opts.after) {
        const op = sql.raw(dir === "desc" ? "<" : ">");
        q = q.where(sql<boolean>`(${sql.ref(col)}, id) ${op} (${opts.after.key}::timestamptz, ${opts.after.id}::uuid)`);
      }
      const rows = await q
        .orderBy(col, dir)
        .orderBy("id", dir)
        .limit(opts.limit + 1)
        .execute();
      return rows.map(toStartTask);
    },

    /** How many of the caller's tasks match `filter` (the search's total). */
    async countForUser(userId: string, filter: StartTaskFilter = {}): Promise<number> {
      const row = await filtered(userId, filter)
        .select((eb) => eb.fn.countAll<string>().as("n"))
        .executeTakeFirstOrThrow();
      return Number(row.n);
    },

    async delete(id: string): Promise<void> {
      await db.deleteFrom("start_tasks").where("id", "=", id).execute();
    },

    /**
     * Takes ownership of a task for a job attempt (the fencing token). Refused (null) when a newer
     * attempt already owns it or the task is finished, so a stale worker stops before doing anything.
     */
    async claim(id: string, attempt: number): Promise<StartTask | null> {
      const row = await db
        .updateTable("start_tasks")
        // A worker has it: it no longer waits for one.
        .set((eb) => ({
          attempt,
          detail: eb.case().when("detail", "=", WAITING_FOR_WORKER).then(null).else(eb.ref("detail")).end(),
        }))
        .where("id", "=", id)
        .where("attempt", "<=", attempt)
        .where("status", "not in", TERMINAL)
        .returningAll()
        .executeTakeFirst();
      return row ? toStartTask(row) : null;
    },

    /** Notes on a task still WORKING that no worker is alive to take it (WAITING_FOR_WORKER). */
    async noteWaitingForWorker(id: string): Promise<void> {
      await db
        .updateTable("start_tasks")
        .set({ detail: WAITING_FOR_WORKER })
        .where("id", "=", id)
        .where("status", "=", "WORKING")
        .where("detail", "is", null)
        .execute();
    },

    /** How many tasks still wait for a worker (start_tasks_inflight_idx: in-flight tasks only). */
    async countWaitingForWorker(): Promise<number> {
      const row = await db
        .selectFrom("start_tasks")
        .select((eb) => eb.fn.countAll<string>().as("n"))
        .where("status", "not in", TERMINAL)
        .where("detail", "=", WAITING_FOR_WORKER)
        .executeTakeFirstOrThrow();
      return Number(row.n);
    },

    /**
     * Persists the stage that begins now, and how long the previous one took. Carries the attempt:
     * a write from an attempt that no longer owns the task changes nothing and returns false.
     */
    enterStage(id: string, attempt: number, status: StartTaskStatus, finished?: FinishedStage): Promise<boolean> {
      return fencedUpdate(id, attempt, { status, stage_durations: addDuration(finished) }, finished?.passed);
    },

    setSandbox(id: string, attempt: number, sandboxId: string): Promise<boolean> {
      return fencedUpdate(id, attempt, { sandbox_id: sandboxId });
    },

    markReady(
      id: string,
      attempt: number,
      /** Null for a sandbox's own start (kind "sandbox"), which makes no conversation. */
      conversationId: string | null,
      finished?: FinishedStage,
    ): Promise<boolean> {
      return fencedUpdate(
        id,
        attempt,
        { status: "READY", app_conversation_id: conversationId, stage_durations: addDuration(finished) },
        finished?.passed,
      );
    },

    /**
     * Ends a task in ERROR. With an attempt, only if that attempt still owns it; without one
     * (janitor, deadline sweep, a job BullMQ gave up on) whenever it is not finished yet.
     */
    async markError(id: string, detail: string, attempt?: number): Promise<boolean> {
      return inTransaction(db, async (trx) => {
        let q = trx
          .updateTable("start_tasks")
          .set({
            status: "ERROR",
            detail,
            stage_history: enterHistory("ERROR"),
            updated_at: sql<string>`clock_timestamp()`,
          })
          .where("id", "=", id)
          .where("status", "not in", TERMINAL);
        if (attempt !== undefined) q = q.where("attempt", "=", attempt);
        const row = await q.returningAll().executeTakeFirst();
        if (row) await writeStartTaskStatusOutbox(trx, row.id);
        return row !== undefined;
      });
    },

    /** What the running stage is doing now (null: nothing to say); fenced like every stage write. */
    setDetail(id: string, attempt: number, detail: string | null): Promise<boolean> {
      return fencedUpdate(id, attempt, { detail });
    },

    /** Keeps the setup script's output (already capped by the caller); fenced like every stage write. */
    async setSetupOutput(id: string, attempt: number, output: string): Promise<boolean> {
      const res = await db
        .updateTable("start_tasks")
        .set({ setup_output: output })
        .where("id", "=", id)
        .where("attempt", "=", attempt)
        .executeTakeFirst();
      return res.numUpdatedRows > 0n;
    },

    async getSetupOutput(id: string): Promise<string | null> {
      const row = await db.selectFrom("start_tasks").select("setup_output").where("id", "=", id).executeTakeFirst();
      return row?.setup_output ?? null;
    },

    /**
     * What a user holds, for the quotas: work in progress (`startsInFlight`: tern_work_in_progress,
     * starts in flight and agent-server runs not ended), and sandboxes that are live: those of
     * starts in flight (made, or about to be; start_tasks_user_inflight_idx) and the live
     * sandboxes of finished starts (sandboxes_live_idx).
     */
    async countHeldByUser(userId: string): Promise<{ startsInFlight: number; liveSandboxes: number }> {
      const row = await db
        .selectNoFrom((eb) => [
          sql<number>`tern_work_in_progress(${userId}::uuid)`.as("in_progress"),
          eb
            .selectFrom("start_tasks")
            .select(eb.fn.countAll<string>().as("n"))
            .where("user_id", "=", userId)
            .where("status", "not in", TERMINAL)
            .as("in_flight"),
          eb
            .selectFrom("sandboxes as s")
            .innerJoin("start_tasks as t", "t.id", "s.start_task_id")
            .select(eb.fn.countAll<string>().as("n"))
            .where("s.status", "in", ["STARTING", "RUNNING", "PAUSED"])
            .where("t.user_id", "=", userId)
            .where("t.status", "in", TERMINAL)
            .as("live_ready"),
        ])
        .executeTakeFirstOrThrow();
      const inFlight = Number(row.in_flight ?? 0);
      return { startsInFlight: Number(row.in_progress ?? 0), liveSandboxes: inFlight + Number(row.live_ready ?? 0) };
    },

    /**
     * The user's work in progress as a run of `conversationId` would find it (tern_work_in_progress),
     * that conversation's own run left out.
     */
    async workInProgressBeside(userId: string, conversationId: string): Promise<number> {
      const { rows } = await sql<{ n: number }>`
        select tern_work_in_progress(${userId}::uuid, ${conversationId}::uuid) as n`.execute(db);
      return Number(rows[0]?.n ?? 0);
    },

    /** Tasks still in flight, oldest progress first (partial index start_tasks_inflight_idx). */
    async listInFlight(opts: { updatedBefore?: Date; limit?: number } = {}): Promise<StartTask[]> {
      let q = db.selectFrom("start_tasks").selectAll().where("status", "not in", TERMINAL);
      if (opts.updatedBefore) q = q.where("updated_at", "<", opts.updatedBefore.toISOString());
      const rows = await q
        .orderBy("updated_at", "asc")
        .limit(opts.limit ?? 500)
        .execute();
      return rows.map(toStartTask);
    },
  };
};

export type StartTasksRepository = ReturnType<typeof startTasksRepository>;
