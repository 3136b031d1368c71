import { type Kysely, type Selectable, sql } from "kysely";
import type { Database, WarmSandboxesTable } from "../schema.ts";

/** A warm sandbox as its row says (issue 23 §1). */
export interface WarmSandbox {
  id: string;
  name: string;
  ref: string;
  engineId: string | null;
  image: string;
  spec: string;
  ownerWorker: string;
  workspaceDir: string;
  systemPrompt: { text: string; tools: unknown[] };
  llmModel: string | null;
  claimedAt: string | null;
  conversationId: string | null;
}

const toWarm = (r: Selectable<WarmSandboxesTable>): WarmSandbox => ({
  id: r.id,
  name: r.name,
  ref: r.ref,
  engineId: r.engine_id,
  image: r.image,
  spec: r.spec,
  ownerWorker: r.owner_worker,
  workspaceDir: r.workspace_dir,
  systemPrompt: r.system_prompt,
  llmModel: r.llm_model,
  claimedAt: r.claimed_at,
  conversationId: r.conversation_id,
});

/**
 * How recently its owner must have seen a warm sandbox running for a claim to take it: a row whose
 * worker died stops being handed out after this (its container goes with the janitor's sweep).
 */
export const WARM_ROW_FRESH_MS = 45_000;

export const warmSandboxesRepository = (db: Kysely<Database>) => ({
  /** A pool's new warm sandbox, claimable from the commit on. */
  async add(input: Omit<WarmSandbox, "claimedAt" | "conversationId">): Promise<void> {
    await db
      .insertInto("warm_sandboxes")
      .values({
        id: input.id,
        name: input.name,
        ref: input.ref,
        engine_id: input.engineId,
        image: input.image,
        spec: input.spec,
        owner_worker: input.ownerWorker,
        workspace_dir: input.workspaceDir,
        system_prompt: JSON.stringify(input.systemPrompt),
        llm_model: input.llmModel,
      })
      .execute();
  },

  /**
   * In the caller's transaction: takes one healthy, recently checked, unclaimed row of `spec` for
   * `conversationId`, and writes the sandboxes row of the start task `owner.taskId` for it (same
   * id, name and container; RUNNING), in one statement. Rows another transaction holds are
   * skipped, never waited for, so concurrent starts never share a row and never queue behind each
   * other. Null when none is left (nothing written).
   */
  async claim(
    spec: string,
    conversationId: string,
    owner: { taskId: string; userId: string },
  ): Promise<WarmSandbox | null> {
    const row = await sql<Selectable<WarmSandboxesTable>>`
      with taken as (
        update warm_sandboxes set claimed_at = now(), conversation_id = ${conversationId}::uuid
        where id = (
          select id from warm_sandboxes
          where spec = ${spec} and claimed_at is null and healthy
            and checked_at > now() - make_interval(secs => ${WARM_ROW_FRESH_MS / 1000})
          order by created_at
          limit 1
          for update skip locked
        )
        returning *
      ), recorded as (
        insert into sandboxes (id, name, image, user_id, start_task_id, status, engine_id, ref)
        select id, name, image, ${owner.userId}::uuid, ${owner.taskId}::uuid, 'RUNNING', engine_id, ref from taken
        returning id
      )
      select taken.* from taken join recorded using (id)`.execute(db);
    const r = row.rows[0];
    return r ? toWarm(r) : null;
  },

  /**
   * The pool's own claim (a start on the queue path): the row goes, unless the API claimed it first
   * (false: the pool must not hand the sandbox out).
   */
  async take(name: string): Promise<boolean> {
    const r = await db
      .deleteFrom("warm_sandboxes")
      .where("name", "=", name)
      .where("claimed_at", "is", null)
      .executeTakeFirst();
    return r.numDeletedRows > 0n;
  },

  /** The names of `owner`'s rows no claim took yet. */
  async unclaimedOf(owner: string): Promise<Set<string>> {
    const rows = await db
      .selectFrom("warm_sandboxes")
      .select("name")
      .where("owner_worker", "=", owner)
      .where("claimed_at", "is", null)
      .execute();
    return new Set(rows.map((r) => r.name));
  },

  /** Its owner saw these running just now (health). */
  async touch(owner: string, names: string[]): Promise<void> {
    if (names.length === 0) return;
    await db
      .updateTable("warm_sandboxes")
      .set({ checked_at: sql`now()`, healthy: true })
      .where("owner_worker", "=", owner)
      .where("name", "in", names)
      .where("claimed_at", "is", null)
      .execute();
  },

  /** Unclaimed rows of these sandboxes go (removed, dead, or not needed); a claimed row stays its conversation's. */
  async removeUnclaimed(names: string[]): Promise<void> {
    if (names.length === 0) return;
    await db.deleteFrom("warm_sandboxes").where("name", "in", names).where("claimed_at", "is", null).execute();
  },

  /** Every unclaimed row of `owner` (a pool starting again under the same id, or stopping). */
  async removeUnclaimedOf(owner: string): Promise<void> {
    await db.deleteFrom("warm_sandboxes").where("owner_worker", "=", owner).where("claimed_at", "is", null).execute();
  },

  /** The claimed row of a conversation's sandbox whose first run has not looked at it yet. */
  async claimedUnchecked(sandboxId: string): Promise<WarmSandbox | null> {
    const r = await db
      .selectFrom("warm_sandboxes")
      .selectAll()
      .where("id", "=", sandboxId)
      .where("claimed_at", "is not", null)
      .executeTakeFirst();
    return r ? toWarm(r) : null;
  },

  /** The claimed sandbox answered (or was replaced): its row has done its work. */
  async remove(id: string): Promise<void> {
    await db.deleteFrom("warm_sandboxes").where("id", "=", id).execute();
  },

  /**
   * Upkeep: unclaimed rows no owner has checked for `olderThanMs` (their worker is gone), and
   * claimed rows no run looked at within `claimedForMs` (a conversation started without a message
   * whose first run never came: a later run finds a dead sandbox as any run does).
   */
  async removeStale(olderThanMs: number, claimedForMs = 3_600_000): Promise<number> {
    const r = await db
      .deleteFrom("warm_sandboxes")
      .where((eb) =>
        eb.or([
          eb.and([
            eb("claimed_at", "is", null),
            eb("checked_at", "<", sql<string>`now() - make_interval(secs => ${olderThanMs / 1000})`),
          ]),
          eb("claimed_at", "<", sql<string>`now() - make_interval(secs => ${claimedForMs / 1000})`),
        ]),
      )
      .executeTakeFirst();
    return Number(r.numDeletedRows);
  },
});

export type WarmSandboxesRepository = ReturnType<typeof warmSandboxesRepository>;

/** The outbox of agent runs asked for inside a transaction (a warm claim), until a relay enqueued them. */
export const agentRunOutboxRepository = (db: Kysely<Database>) => ({
  async add(entry: { conversationId: string; runId: string; engineId: string | null }): Promise<string> {
    const r = await db
      .insertInto("agent_run_outbox")
      .values({ conversation_id: entry.conversationId, run_id: entry.runId, engine_id: entry.engineId })
      .returning("id")
      .executeTakeFirstOrThrow();
    return String(r.id);
  },

  /**
   * Relays what is due: each entry is locked (others skip it), handed to `enqueue`, and deleted in
   * the same transaction, so an entry whose enqueue failed stays for the next pass. An entry
   * relayed twice (a commit lost after the enqueue) is harmless: a run's job id is fixed.
   */
  async relay(
    enqueue: (e: { conversationId: string; runId: string; engineId: string | null }) => Promise<void>,
    opts: { limit?: number; olderThanMs?: number; ids?: string[] } = {},
  ): Promise<number> {
    return db.transaction().execute(async (trx) => {
      let q = trx.selectFrom("agent_run_outbox").selectAll();
      if (opts.ids) q = q.where("id", "in", opts.ids);
      if (opts.olderThanMs)
        q = q.where("created_at", "<", sql<string>`now() - make_interval(secs => ${opts.olderThanMs / 1000})`);
      const rows = await q
        .orderBy("id")
        .limit(opts.limit ?? 100)
        .forUpdate()
        .skipLocked()
        .execute();
      const done: string[] = [];
      for (const r of rows) {
        await enqueue({ conversationId: r.conversation_id, runId: r.run_id, engineId: r.engine_id });
        done.push(String(r.id));
      }
      if (done.length > 0) await trx.deleteFrom("agent_run_outbox").where("id", "in", done).execute();
      return done.length;
    });
  },
});
