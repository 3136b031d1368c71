import { newId, type StartRequest, type StartTask, type StartTaskStatus } from "@tern/core";
import { type Kysely, type Selectable, sql, type UpdateObject } from "kysely";
import type { Database, StartTasksTable } from "../schema.ts";

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
});

const TERMINAL = ["READY", "ERROR"] as const;

/** Merges one finished stage's duration into stage_durations (nothing when none finished). */
const addDuration = (finished?: { stage: string; ms: number }) =>
  sql<string>`stage_durations || ${finished ? JSON.stringify({ [finished.stage]: finished.ms }) : "{}"}::jsonb`;

export const startTasksRepository = (db: Kysely<Database>) => {
  /**
   * The one write path of a running start: it only lands while `attempt` (the fencing token)
   * still owns the task and the task is not finished. False when it was refused.
   */
  const fencedUpdate = async (id: string, attempt: number, set: UpdateObject<Database, "start_tasks">) => {
    const res = await db
      .updateTable("start_tasks")
      .set({ ...set, updated_at: sql<string>`clock_timestamp()` })
      .where("id", "=", id)
      .where("attempt", "=", attempt)
      .where("status", "not in", TERMINAL)
      .executeTakeFirst();
    return res.numUpdatedRows > 0n;
  };

  return {
    async create(userId: string, request: StartRequest, id: string = newId()): Promise<StartTask> {
      const row = await db
        .insertInto("start_tasks")
        .values({ id, user_id: userId, status: "WORKING", request: JSON.stringify(request) })
        .returningAll()
        .executeTakeFirstOrThrow();
      return toStartTask(row);
    },

    async get(id: string): Promise<StartTask | null> {
      const row = await db.selectFrom("start_tasks").selectAll().where("id", "=", id).executeTakeFirst();
      return row ? toStartTask(row) : null;
    },

    /** The caller's tasks among `ids` (any order); foreign and unknown ids are simply absent. */
    async findForUser(userId: string, ids: string[]): Promise<StartTask[]> {
      if (ids.length === 0) return [];
      const rows = await db
        .selectFrom("start_tasks")
        .selectAll()
        .where("user_id", "=", userId)
        .where("id", "in", ids)
        .execute();
      return rows.map(toStartTask);
    },

    /**
     * The caller's tasks, newest first, keyset-paged after (created_at, id) of the last one seen
     * (start_tasks_user_created_idx). Returns up to `limit` + 1 rows so the caller knows if more follow.
     */
    async searchForUser(
      userId: string,
      opts: { limit: number; after?: { createdAt: string; id: string } | null },
    ): Promise<StartTask[]> {
      let q = db.selectFrom("start_tasks").selectAll().where("user_id", "=", userId);
      if (opts.after) {
        q = q.where(sql<boolean>`(created_at, id) < (${opts.after.createdAt}::timestamptz, ${opts.after.id}::uuid)`);
      }
      const rows = await q
        .orderBy("created_at", "desc")
        .orderBy("id", "desc")
        .limit(opts.limit + 1)
        .execute();
      return rows.map(toStartTask);
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
        .set({ attempt })
        .where("id", "=", id)
        .where("attempt", "<=", attempt)
        .where("status", "not in", TERMINAL)
        .returningAll()
        .executeTakeFirst();
      return row ? toStartTask(row) : null;
    },

    /**
     * Persists the stage that begins now, and how long the previous one took. Carries the attempt:
     * a write from an attempt that no longer owns the task changes nothing and returns false.
     */
    enterStage(
      id: string,
      attempt: number,
      status: StartTaskStatus,
      finished?: { stage: string; ms: number },
    ): Promise<boolean> {
      return fencedUpdate(id, attempt, { status, stage_durations: addDuration(finished) });
    },

    setSandbox(id: string, attempt: number, sandboxId: string): Promise<boolean> {
      return fencedUpdate(id, attempt, { sandbox_id: sandboxId });
    },

    markReady(
      id: string,
      attempt: number,
      conversationId: string,
      finished?: { stage: string; ms: number },
    ): Promise<boolean> {
      return fencedUpdate(id, attempt, {
        status: "READY",
        app_conversation_id: conversationId,
        stage_durations: addDuration(finished),
      });
    },

    /**
     * Ends a task in ERROR. With an attempt, only if that attempt still owns it; without one
     * (janitor, deadline sweep, a job BullMQ gave up on) whenever it is not finished yet.
     */
    async markError(id: string, detail: string, attempt?: number): Promise<boolean> {
      let q = db
        .updateTable("start_tasks")
        .set({ status: "ERROR", detail, updated_at: sql<string>`clock_timestamp()` })
        .where("id", "=", id)
        .where("status", "not in", TERMINAL);
      if (attempt !== undefined) q = q.where("attempt", "=", attempt);
      const res = await q.executeTakeFirst();
      return res.numUpdatedRows > 0n;
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
