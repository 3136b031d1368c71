import {
  type ConfirmationPolicy,
  confirmationPolicySchema,
  type EventDraft,
  newEvent,
  parseStoredEvent,
  type StoredEventOf,
} from "@tern/core";
import { type Kysely, sql, type Transaction } from "kysely";
import type { Database } from "../schema.ts";
import { agentRunsRepository, type RequestedRun } from "./agent-runs.ts";
import { eventsRepository } from "./events.ts";

export type ConfirmationAnswer = { accept: true } | { accept: false; reason: string };

export type AnswerResult =
  /** The pending actions the answer was about (run on accept; each rejected on reject). */
  | { outcome: "answered"; pending: StoredEventOf<"ActionEvent">[]; run: RequestedRun | null }
  /** Nothing waits: never asked, or already answered (a second answer, or one after a reject). */
  | { outcome: "not_waiting" }
  | { outcome: "missing" };

/**
 * Confirmation mode's state. What waits is written by the run itself: it ends with its
 * pending ActionEvents and `waiting_for_confirmation` in one transaction (agentRunsRepository.end),
 * so no worker can die between the two. The answer is one transaction too, under the same row lock
 * every run write takes: the status leaves `waiting_for_confirmation` exactly once, so a second
 * answer finds nothing waiting, and a run never executes an action nobody accepted (a run does
 * not begin while the conversation waits: agentRunsRepository.begin).
 */
export const confirmationsRepository = (db: Kysely<Database>) => {
  /**
   * ActionEvents of the latest run with no result (ObservationEvent or UserRejectObservation).
   * Served by events (conversation_id, kind, timestamp, seq); only the latest run's actions are read.
   */
  const pendingActions = async (
    trx: Kysely<Database> | Transaction<Database>,
    conversationId: string,
  ): Promise<StoredEventOf<"ActionEvent">[]> => {
    const since = (await eventsRepository(trx).lastRunStartSeq(conversationId)) ?? 0;
    const rows = await trx
      .selectFrom("events as a")
      .selectAll("a")
      .where("a.conversation_id", "=", conversationId)
      .where("a.kind", "=", "ActionEvent")
      .where("a.seq", ">", since)
      .where(({ not, exists, selectFrom }) =>
        not(
          exists(
            selectFrom("events as o")
              .select(sql`1`.as("one"))
              .where("o.conversation_id", "=", conversationId)
              .where("o.kind", "in", ["ObservationEvent", "UserRejectObservation"])
              .where("o.seq", ">", since)
              .where(sql<boolean>`o.payload->>'action_id' = a.id::text`),
          ),
        ),
      )
      .orderBy("a.seq")
      .execute();
    return rows.map(
      (r) => parseStoredEvent({ ...r, conversationId: r.conversation_id }) as StoredEventOf<"ActionEvent">,
    );
  };

  return {
    pendingActions: (conversationId: string) => pendingActions(db, conversationId),

    /** The conversation's own policy; null: its user's settings decide. */
    async policy(conversationId: string): Promise<ConfirmationPolicy | null> {
      const row = await db
        .selectFrom("conversation_confirmation_policies")
        .select("policy")
        .where("conversation_id", "=", conversationId)
        .executeTakeFirst();
      if (!row) return null;
      const parsed = confirmationPolicySchema.safeParse(row.policy);
      return parsed.success ? (parsed.data as ConfirmationPolicy) : null;
    },

    /**
     * Sets the conversation's own policy, with a ConversationStateUpdateEvent (`confirmation_policy`,
     * as OpenHands' state update names it) in the same transaction: who watches sees the change.
     */
    async setPolicy(conversationId: string, policy: ConfirmationPolicy): Promise<void> {
      const value = JSON.stringify(policy);
      await db.transaction().execute(async (trx) => {
        await trx
          .insertInto("conversation_confirmation_policies")
          .values({ conversation_id: conversationId, policy: value })
          .onConflict((oc) => oc.column("conversation_id").doUpdateSet({ policy: value, updated_at: sql`now()` }))
          .execute();
        await eventsRepository(trx).append(conversationId, [newEvent.stateUpdate("confirmation_policy", policy)]);
      });
    },

    /**
     * The user's answer to what waits. Accept: the status leaves `waiting_for_confirmation` (for
     * `idle`, as OpenHands', until the run the caller asks for begins and runs the actions).
     * Reject: a UserRejectObservation per pending action, with the reason, then `idle`.
     */
    /**
     * The answer and, with `run`, the run that acts on it (queued, on its engine's queue), in one
     * transaction: an answer is never stored without the run it asks for.
     */
    async answer(
      conversationId: string,
      answer: ConfirmationAnswer,
      opts: { run?: { engineId: string | null } } = {},
    ): Promise<AnswerResult> {
      return db.transaction().execute(async (trx) => {
        const row = await trx
          .selectFrom("conversations")
          .select(["execution_status"])
          .where("id", "=", conversationId)
          .forUpdate()
          .executeTakeFirst();
        if (!row) return { outcome: "missing" } as const;
        if (row.execution_status !== "waiting_for_confirmation") return { outcome: "not_waiting" } as const;
        const pending = await pendingActions(trx, conversationId);
        const drafts: EventDraft[] = answer.accept
          ? []
          : pending.map((a) =>
              newEvent.userReject(
                { id: a.id, tool_name: a.payload.tool_name, tool_call_id: a.payload.tool_call_id },
                answer.reason,
              ),
            );
        // The answer's events go past the cap: refusing them would leave the conversation waiting for ever.
        await eventsRepository(trx).append(conversationId, [...drafts, newEvent.executionStatus("idle")]);
        await trx
          .updateTable("conversations")
          .set({ execution_status: "idle", updated_at: sql<string>`clock_timestamp()` })
          .where("id", "=", conversationId)
          .execute();
        const run = opts.run
          ? await agentRunsRepository(trx).request({ conversationId, engineId: opts.run.engineId })
          : null;
        return { outcome: "answered", pending, run } as const;
      });
    },
  };
};

export type ConfirmationsRepository = ReturnType<typeof confirmationsRepository>;
