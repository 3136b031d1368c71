import type { StartRequest, StartTask } from "@tern/core";
import { type Kysely, type Selectable, sql } from "kysely";
import type { Database, StartTasksTable, WarmSandboxesTable } from "../schema.ts";
import type { RequestedRun } from "./agent-runs.ts";
import { type FirstEvents, type OpeningConversation, openingParams } from "./conversation-opening.ts";
import { toStartTask } from "./start-tasks.ts";

/** A warm sandbox as its row says. */
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

/** What the one-round-trip warm claim (`tern_warm_claim`, sql/tern_warm_claim.sql) is given. */
export interface WarmClaimInput {
  /**
   * The conversation it opens (tern_open_conversation); the warm row gives its sandbox, its empty
   * workspace and its system prompt.
   */
  conversation: OpeningConversation;
  /** The request's model (else the user's setting, else the row's). */
  llmModel: string | null;
  /** The first events besides the row's system prompt; a user message also asks for the first run. */
  first: Omit<FirstEvents, "systemPrompt">;
  /** The request as the task keeps it. */
  request: StartRequest;
  spec: string;
  /** MAX_STARTS_IN_FLIGHT_PER_USER / MAX_SANDBOXES_PER_USER; absent or 0: not checked. */
  maxInFlight?: number;
  maxSandboxes?: number;
}

export type WarmClaimOutcome =
  | { outcome: "hit"; task: StartTask; run: RequestedRun | null }
  | { outcome: "miss" }
  | { outcome: "quota"; startsInFlight: number; liveSandboxes: number };

/**
 * The API's warm claim in one round trip: quotas (the user's row locked), a row of the
 * spec (FOR UPDATE SKIP LOCKED), the task READY with its stage history, its sandbox, the
 * conversation, its first events, its first run (queued) and the webhook outbox, all in one
 * statement (the function's one transaction). A miss or a quota writes nothing.
 */
export const claimWarmStartAtOnce = async (db: Kysely<Database>, input: WarmClaimInput): Promise<WarmClaimOutcome> => {
  const p = {
    ...openingParams(input.conversation, input.first),
    llm_model: input.llmModel,
    request: input.request,
    spec: input.spec,
    fresh_secs: WARM_ROW_FRESH_MS / 1000,
    max_in_flight: input.maxInFlight ?? null,
    max_sandboxes: input.maxSandboxes ?? null,
  };
  const r = await sql<{
    claim: Record<string, unknown>;
  }>`select tern_warm_claim(${JSON.stringify(p)}::jsonb) as claim`.execute(db);
  const claim = r.rows[0]?.claim;
  if (!claim) throw new Error("tern_warm_claim returned nothing");
  if (claim.outcome === "miss") return { outcome: "miss" };
  if (claim.outcome === "quota") {
    return { outcome: "quota", startsInFlight: Number(claim.in_flight), liveSandboxes: Number(claim.live) };
  }
  return {
    outcome: "hit",
    task: toStartTask(claim.task as Selectable<StartTasksTable>),
    run:
      claim.run_id == null
        ? null
        : {
            conversationId: input.conversation.id,
            runId: String(claim.run_id),
            engineId: (claim.engine_id as string | null) ?? null,
          },
  };
};
