import {
  hashApiKey,
  newId,
  type OwnedSandbox,
  type Sandbox,
  type SandboxStatus,
  type StoredSessionApiKey,
} from "@tern/core";
import { type ExpressionBuilder, type Kysely, type Selectable, sql, type Transaction } from "kysely";
import type { Database, SandboxesTable } from "../schema.ts";

/** A sandboxes row as the Sandbox it is (exported for statements of other repositories that read one). */
export const toSandbox = (r: Selectable<SandboxesTable>): Sandbox => ({
  id: r.id,
  userId: r.user_id,
  startTaskId: r.start_task_id,
  conversationId: r.conversation_id,
  name: r.name,
  ref: r.ref,
  status: r.status as SandboxStatus,
  image: r.image,
  createdAt: r.created_at,
  updatedAt: r.updated_at,
  idlePausedAt: r.idle_paused_at,
  engineId: r.engine_id,
  engineLostAt: r.engine_lost_at,
});

/** A conversation's sandbox the janitor may pause or remove. */
export interface RetirableSandbox {
  sandboxId: string;
  conversationId: string;
  /** What the driver is called with: the ref, or the name when the ref was never recorded. */
  ref: string;
}

/** When the janitor may still pause or remove a sandbox: checked again under the lock. */
export interface RetireCondition {
  statuses: SandboxStatus[];
  /** The conversation has had no event since. */
  idleBefore?: Date;
  /** The sandbox was created before. */
  createdBefore?: Date;
}

const LIVE: SandboxStatus[] = ["STARTING", "RUNNING", "PAUSED"];

/**
 * The sandboxes a janitor of `engineId` may act on: its engine's own (null: a driver without
 * affinity, whose sandboxes have no engine). Another engine's are never its to pause or remove.
 */
const onEngine = (engineId: string | null) => (eb: ExpressionBuilder<Database & { s: SandboxesTable }, "s">) =>
  engineId === null ? eb("s.engine_id", "is", null) : eb("s.engine_id", "=", engineId);

/**
 * The owner of a sandbox row being written: its start task's user, else its conversation's. Read
 * in the same statement, so no writer has to know the user to keep `user_id` right.
 */
const ownerOf = (startTaskId: string | null, conversationId: string | null) =>
  sql<string | null>`coalesce(
    (select user_id from start_tasks where id = ${startTaskId}::uuid),
    (select user_id from conversations where id = ${conversationId}::uuid)
  )`;

// Reads by the owner carry the session key (SandboxInfo.session_api_key): the sandbox's own, or its conversation's.
const ownedQuery = (db: Kysely<Database>) =>
  db
    .selectFrom("sandboxes")
    .leftJoin("conversations", "conversations.id", "sandboxes.conversation_id")
    .selectAll("sandboxes")
    .select("conversations.session_api_key_sealed as conversation_key_sealed");

const toOwned = (r: Selectable<SandboxesTable> & { conversation_key_sealed: string | null }): OwnedSandbox => ({
  ...toSandbox(r),
  sealedSessionApiKey: r.conversation_key_sealed,
  sealedSandboxSessionApiKey: r.session_api_key_sealed,
});

/**
 * The sandboxes the janitor may retire: a conversation's (joined as `c`), or one made on its own by
 * POST /api/v1/sandboxes once its start is READY (no conversation: idle since it last changed).
 * A conversation's start in flight has no conversation yet either, and is never one of them.
 */
const retirableQuery = (db: Kysely<Database>) =>
  db
    .selectFrom("sandboxes as s")
    .leftJoin("conversations as c", "c.id", "s.conversation_id")
    .leftJoin("start_tasks as t", "t.id", "s.start_task_id")
    .where((eb) =>
      eb.or([
        eb("c.id", "is not", null),
        eb.and([eb("s.conversation_id", "is", null), eb("t.kind", "=", "sandbox"), eb("t.status", "=", "READY")]),
      ]),
    )
    .where("c.active_run_id", "is", null);

/** When a retirable sandbox was last active: its conversation's last event, or its own last change. */
const lastActiveOf = sql<string>`coalesce(c.last_event_at, c.created_at, s.updated_at)`;

export const sandboxesRepository = (db: Kysely<Database>) => ({
  /** Idempotent by name: a second call for the same sandbox returns the first row. */
  async upsert(input: {
    /** Defaults to a new id; a caller that must know it before the row exists passes its own. */
    id?: string;
    name: string;
    image: string;
    startTaskId?: string | null;
    conversationId?: string | null;
    status?: SandboxStatus;
    /** The engine that holds it (drivers with affinity). */
    engineId?: string | null;
    /** A sandbox made on its own (POST /api/v1/sandboxes): its session key, hashed and sealed. */
    sessionApiKey?: StoredSessionApiKey;
  }): Promise<Sandbox> {
    const startTaskId = input.startTaskId ?? null;
    const conversationId = input.conversationId ?? null;
    await db
      .insertInto("sandboxes")
      .values({
        id: input.id ?? newId(),
        name: input.name,
        image: input.image,
        user_id: ownerOf(startTaskId, conversationId),
        start_task_id: startTaskId,
        conversation_id: conversationId,
        status: input.status ?? "STARTING",
        engine_id: input.engineId ?? null,
        session_api_key_hash: input.sessionApiKey?.hash ?? null,
        session_api_key_sealed: input.sessionApiKey?.sealed ?? null,
      })
      .onConflict((oc) => oc.column("name").doNothing())
      .execute();
    const row = await db.selectFrom("sandboxes").selectAll().where("name", "=", input.name).executeTakeFirstOrThrow();
    return toSandbox(row);
  },

  /**
   * The warm sandbox a start claimed, for a row recorded before it was made (POST /api/v1/sandboxes
   * writes its sandbox's row at once): the row takes the warm container's name, by which the
   * janitor and the pool know it is claimed. False when no such row is waiting (insert one instead).
   */
  async adoptWarm(id: string, name: string, engineId: string | null): Promise<boolean> {
    const res = await db
      .updateTable("sandboxes")
      .set({ name, engine_id: engineId, engine_lost_at: null, updated_at: sql<string>`clock_timestamp()` })
      .where("id", "=", id)
      .where("ref", "is", null)
      .where("status", "=", "STARTING")
      .executeTakeFirst();
    return res.numUpdatedRows > 0n;
  },

  /** The sandbox whose own session key `key` is (SHA-256 lookup); null for any other key. */
  async findBySessionKey(key: string): Promise<Sandbox | null> {
    const row = await db
      .selectFrom("sandboxes")
      .selectAll()
      .where("session_api_key_hash", "=", hashApiKey(key))
      .executeTakeFirst();
    return row ? toSandbox(row) : null;
  },

  async get(id: string): Promise<Sandbox | null> {
    const row = await db.selectFrom("sandboxes").selectAll().where("id", "=", id).executeTakeFirst();
    return row ? toSandbox(row) : null;
  },

  async findByTask(startTaskId: string): Promise<Sandbox | null> {
    const row = await db
      .selectFrom("sandboxes")
      .selectAll()
      .where("start_task_id", "=", startTaskId)
      .executeTakeFirst();
    return row ? toSandbox(row) : null;
  },

  /** Served by the unique index on `name`. */
  async findByName(name: string): Promise<Sandbox | null> {
    const row = await db.selectFrom("sandboxes").selectAll().where("name", "=", name).executeTakeFirst();
    return row ? toSandbox(row) : null;
  },

  /** The user's sandboxes among `ids` (any order; the caller orders them). */
  async findForUser(userId: string, ids: string[]): Promise<OwnedSandbox[]> {
    if (ids.length === 0) return [];
    const rows = await ownedQuery(db)
      .where("sandboxes.user_id", "=", userId)
      .where("sandboxes.id", "in", ids)
      .execute();
    return rows.map(toOwned);
  },

  /**
   * The user's sandboxes, newest first, keyset-paged after (created_at, id) of the last one seen
   * (sandboxes_user_created_idx). Returns up to `limit` + 1 rows so the caller knows if more follow.
   */
  async searchForUser(
    userId: string,
    opts: { limit: number; after?: { createdAt: string; id: string } | null },
  ): Promise<OwnedSandbox[]> {
    let q = ownedQuery(db).where("sandboxes.user_id", "=", userId);
    if (opts.after) {
      q = q.where(
        sql<boolean>`(sandboxes.created_at, sandboxes.id) < (${opts.after.createdAt}::timestamptz, ${opts.after.id}::uuid)`,
      );
    }
    const rows = await q
      .orderBy("sandboxes.created_at", "desc")
      .orderBy("sandboxes.id", "desc")
      .limit(opts.limit + 1)
      .execute();
    return rows.map(toOwned);
  },

  /**
   * Runs `fn` holding the sandbox row's lock (`for update`), with the row as it is then: commands
   * that change a sandbox (pause, resume, removal) run one at a time per sandbox, whichever
   * workers take them (and apart from the janitor's idle pause, which locks the same row), so the
   * row's status and the sandbox's state cannot be left apart by two of them interleaving. `fn`
   * gets the transaction to write the new status in.
   */
  async withLock<T>(id: string, fn: (row: Sandbox | null, trx: Transaction<Database>) => Promise<T>): Promise<T> {
    return db.transaction().execute(async (trx) => {
      const row = await trx.selectFrom("sandboxes").selectAll().where("id", "=", id).forUpdate().executeTakeFirst();
      return fn(row ? toSandbox(row) : null, trx);
    });
  },

  async update(
    id: string,
    patch: Partial<{
      status: SandboxStatus;
      ref: string | null;
      conversationId: string | null;
      startTaskId: string | null;
      /** Cleared when the user takes the sandbox's state in hand (their pause or resume). */
      idlePausedAt: null;
      /** Moved to another engine (a start retried there) or first recorded. */
      engineId: string | null;
      /** A replacement container of its own name (a claimed warm sandbox found dead). */
      name: string;
    }>,
  ): Promise<void> {
    await db
      .updateTable("sandboxes")
      .set({
        ...(patch.status !== undefined ? { status: patch.status } : {}),
        ...(patch.ref !== undefined ? { ref: patch.ref } : {}),
        ...(patch.name !== undefined ? { name: patch.name } : {}),
        ...(patch.conversationId !== undefined ? { conversation_id: patch.conversationId } : {}),
        ...(patch.startTaskId !== undefined ? { start_task_id: patch.startTaskId } : {}),
        ...(patch.idlePausedAt !== undefined ? { idle_paused_at: null } : {}),
        // On an engine (again): not lost with the one it was on.
        ...(patch.engineId !== undefined ? { engine_id: patch.engineId, engine_lost_at: null } : {}),
        // A new owner record never leaves the sandbox without its user.
        ...(patch.conversationId !== undefined || patch.startTaskId !== undefined
          ? {
              user_id: sql<
                string | null
              >`coalesce(${ownerOf(patch.startTaskId ?? null, patch.conversationId ?? null)}, sandboxes.user_id)`,
            }
          : {}),
        updated_at: sql<string>`clock_timestamp()`,
      })
      .where("id", "=", id)
      .execute();
  },

  /**
   * RUNNING sandboxes with no run and no activity since `before` (retirableQuery), longest idle
   * first (sandboxes_live_idx: only live sandboxes are read).
   */
  async listIdle(before: Date, engineId: string | null, limit = 100): Promise<RetirableSandbox[]> {
    const rows = await retirableQuery(db)
      .select(["s.id", "s.ref", "s.name", "s.conversation_id"])
      .where("s.status", "=", "RUNNING")
      .where(lastActiveOf, "<", before.toISOString())
      .where(onEngine(engineId))
      .orderBy(lastActiveOf)
      .limit(limit)
      .execute();
    return rows.map((r) => ({ sandboxId: r.id, conversationId: r.conversation_id ?? "", ref: r.ref ?? r.name }));
  },

  /** Live retirable sandboxes (retirableQuery), created before `before` and with no run, oldest first. */
  async listAged(before: Date, engineId: string | null, limit = 100): Promise<RetirableSandbox[]> {
    const rows = await retirableQuery(db)
      .select(["s.id", "s.ref", "s.name", "s.conversation_id"])
      .where("s.status", "in", LIVE)
      .where("s.created_at", "<", before.toISOString())
      .where(onEngine(engineId))
      .orderBy("s.created_at")
      .limit(limit)
      .execute();
    return rows.map((r) => ({ sandboxId: r.id, conversationId: r.conversation_id ?? "", ref: r.ref ?? r.name }));
  },

  /**
   * Inside a transaction: locks the sandbox and its conversation (if it has one) if they still
   * qualify (in one of `statuses`, no run holding the conversation, idle since `idleBefore` or
   * created before `createdBefore` when given). Holding the conversation row keeps a run from
   * beginning (it locks the same row) until the janitor has done its work and committed. False:
   * leave it. The conversation is locked by a second statement (an outer join's nullable side
   * cannot be locked), which checks it again once it holds it.
   */
  async lockRetirable(sandboxId: string, when: RetireCondition): Promise<boolean> {
    let q = retirableQuery(db)
      .select(["s.id", "s.conversation_id"])
      .where("s.id", "=", sandboxId)
      .where("s.status", "in", when.statuses);
    if (when.idleBefore) q = q.where(lastActiveOf, "<", when.idleBefore.toISOString());
    if (when.createdBefore) q = q.where("s.created_at", "<", when.createdBefore.toISOString());
    const sandbox = await q.forUpdate("s").executeTakeFirst();
    if (!sandbox) return false;
    if (sandbox.conversation_id === null) return true;
    let c = db
      .selectFrom("conversations as c")
      .select("c.id")
      .where("c.id", "=", sandbox.conversation_id)
      .where("c.active_run_id", "is", null);
    if (when.idleBefore) {
      c = c.where(sql<string>`coalesce(c.last_event_at, c.created_at)`, "<", when.idleBefore.toISOString());
    }
    return (await c.forUpdate().executeTakeFirst()) !== undefined;
  },

  /** Paused by the janitor for idleness: PAUSED, and the next run may resume it. */
  async markIdlePaused(id: string): Promise<void> {
    await db
      .updateTable("sandboxes")
      .set({
        status: "PAUSED",
        idle_paused_at: sql<string>`clock_timestamp()`,
        updated_at: sql<string>`clock_timestamp()`,
      })
      .where("id", "=", id)
      .execute();
  },

  /**
   * Rows of sandboxes found on `engineId` (by name) that do not say where they are yet (written
   * before engines were recorded): they are recorded there now. Returns how many.
   */
  async recordEngine(names: string[], engineId: string): Promise<number> {
    if (names.length === 0) return 0;
    const res = await db
      .updateTable("sandboxes")
      .set({ engine_id: engineId, updated_at: sql<string>`clock_timestamp()` })
      .where("name", "in", names)
      .where("engine_id", "is", null)
      .executeTakeFirst();
    return Number(res.numUpdatedRows);
  },

  /**
   * The live sandboxes of the engines given up on become MISSING (their record, conversation and events
   * stay), saying why; returns them with their conversations. One statement: a sandbox is lost once.
   */
  async markLostWithEngines(): Promise<{ sandboxId: string; conversationId: string | null; engineId: string }[]> {
    const rows = await db
      .updateTable("sandboxes")
      .set({
        status: "MISSING",
        engine_lost_at: sql<string>`clock_timestamp()`,
        updated_at: sql<string>`clock_timestamp()`,
      })
      .where("engine_id", "in", db.selectFrom("engines").select("id").where("lost_at", "is not", null))
      .where("status", "in", LIVE)
      .returning(["id", "conversation_id", "engine_id"])
      .execute();
    return rows.map((r) => ({ sandboxId: r.id, conversationId: r.conversation_id, engineId: r.engine_id ?? "" }));
  },

  /** Resumed after an idle pause; false when it was not (or no longer) paused for idleness. */
  async markResumedFromIdle(id: string): Promise<boolean> {
    const res = await db
      .updateTable("sandboxes")
      .set({ status: "RUNNING", idle_paused_at: null, updated_at: sql<string>`clock_timestamp()` })
      .where("id", "=", id)
      .where("status", "=", "PAUSED")
      .where("idle_paused_at", "is not", null)
      .executeTakeFirst();
    return res.numUpdatedRows > 0n;
  },
});

export type SandboxesRepository = ReturnType<typeof sandboxesRepository>;
