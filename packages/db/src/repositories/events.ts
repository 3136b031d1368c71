import {
  type AgentHistoryRead,
  type EventDraft,
  EventLimitError,
  metrics,
  newId,
  parseStoredEvent,
  type RunProgress,
  type StoredEvent,
} from "@tern/core";
import { type Kysely, type RawBuilder, type Selectable, sql } from "kysely";
import type { Database } from "../schema.ts";
import { type EventColumns, toEvent } from "./events-search.ts";

type EventRow = Selectable<Database["events"]>;

const conversationExists = async (db: Kysely<Database>, conversationId: string) =>
  !!(await db.selectFrom("conversations").select("id").where("id", "=", conversationId).executeTakeFirst());

const toStored = (r: EventRow): StoredEvent => parseStoredEvent({ ...r, conversationId: r.conversation_id });

/** Conditions and extra writes a run's append carries in its one statement (agentRunsRepository). */
export interface AppendGuard {
  onlyIfEmpty?: boolean;
  maxEvents?: number;
  /**
   * Appends only while this run attempt holds the conversation. Checked in the statement's own
   * update of the conversation row, so under the row lock that update takes (a concurrent `begin`
   * of a newer attempt either commits first and the check fails, or waits for this append).
   */
  lease?: { runId: string; attempt: number };
  /** A new value of the conversation's `metrics`, written by the same statement (a step's LLM usage). */
  metrics?: RawBuilder<unknown>;
}

/** An append done, or refused (null: a guard failed or the conversation does not exist; nothing written). */
type GuardedAppend = { events: StoredEvent[]; metrics: Record<string, number> } | null;

/**
 * The one append statement: the conversation row's update (the per-conversation counter, and the
 * guards), the events' multi-row insert, and the webhook outbox, in one round trip and so one
 * transaction when run outside one. The events' insert fires the change notification of
 * migration 0080 once per statement, at commit.
 */
const appendGuarded = async (
  db: Kysely<Database>,
  conversationId: string,
  drafts: EventDraft[],
  guard: AppendGuard,
): Promise<GuardedAppend> => {
  const n = drafts.length;
  const rows = drafts.map((d, i) => ({
    ord: i + 1,
    id: d.id ?? newId(),
    kind: d.kind,
    source: d.source,
    payload: d.payload,
  }));
  const result = await sql<EventColumns & { metrics: Record<string, number> }>`
    with c as (
      update conversations
      set last_seq = last_seq + ${n},
          last_event_at = greatest(clock_timestamp(), coalesce(last_event_at, '-infinity'::timestamptz) + interval '1 microsecond')
                          + (${n}::int - 1) * interval '1 microsecond'
          ${guard.metrics ? sql`, metrics = ${guard.metrics}, updated_at = clock_timestamp()` : sql``}
      where id = ${conversationId} ${guard.onlyIfEmpty ? sql`and last_seq = 0` : sql``}
        ${guard.maxEvents ? sql`and last_seq + ${n} <= ${guard.maxEvents}` : sql``}
        ${guard.lease ? sql`and active_run_id = ${guard.lease.runId} and run_attempt = ${guard.lease.attempt}` : sql``}
      returning last_seq, last_event_at, user_id, metrics
    ),
    ins as (
      insert into events (conversation_id, seq, id, kind, source, "timestamp", payload)
      select ${conversationId}, c.last_seq - ${n} + v.ord, v.id, v.kind, v.source,
             c.last_event_at - (${n}::int - v.ord) * interval '1 microsecond', v.payload
      from c, jsonb_to_recordset(${JSON.stringify(rows)}::jsonb)
           as v(ord int, id uuid, kind text, source text, payload jsonb)
      order by v.ord
      returning id, seq, kind, source, "timestamp", payload
    ),
    -- The webhook outbox, in this same statement (so the same transaction) as the append
    -- (tern_event_webhooks, as every event writer writes it); nothing to do for a user with no
    -- live webhook, the common case.
    outbox as (
      select tern_event_webhooks(${conversationId}::uuid, c.user_id, jsonb_agg(jsonb_build_object(
               'id', ins.id, 'kind', ins.kind, 'source', ins.source,
               'timestamp', tern_iso(ins."timestamp"), 'payload', ins.payload) order by ins.seq))
      from ins cross join c
      where exists (select 1 from webhooks w where w.user_id = c.user_id and w.deleted_at is null)
      group by c.user_id
    )
    select ins.id, ins.seq, ins.kind, ins.source, ins."timestamp", ins.payload,
           ${guard.metrics ? sql`c.metrics` : sql`null`} as metrics
    from ins, c
    -- Referenced, so the outbox is written (a plain select in WITH runs only when read).
    where (select count(*) from outbox) >= 0
    order by ins.seq
  `.execute(db);
  if (result.rows.length === 0) return null;
  if (result.rows.length !== n) throw new Error(`append to ${conversationId}: ${result.rows.length} of ${n} events`);
  metrics.eventsAppended.inc(n);
  return {
    events: result.rows.map((r) => toEvent(r, conversationId)),
    metrics: result.rows[0]?.metrics ?? {},
  };
};

export const eventsRepository = (db: Kysely<Database>) => ({
  /**
   * Appends events in order, in one statement. The conversation row is the per-conversation
   * counter: its row lock serialises appenders, so sequence numbers and timestamps are strictly
   * increasing and commit in order (a reader's keyset cursor never skips a late commit).
   */
  async append(
    conversationId: string,
    drafts: EventDraft[],
    /**
     * onlyIfEmpty: appends nothing (returns []) when the conversation has events already, atomically.
     * maxEvents: refuses (EventLimitError, nothing appended) when the conversation would hold more.
     */
    opts: { onlyIfEmpty?: boolean; maxEvents?: number } = {},
  ): Promise<StoredEvent[]> {
    if (drafts.length === 0) return [];
    const done = await appendGuarded(db, conversationId, drafts, opts);
    if (done) return done.events;
    if (opts.onlyIfEmpty) return [];
    if (opts.maxEvents && (await conversationExists(db, conversationId))) throw new EventLimitError(opts.maxEvents);
    throw new Error(`conversation ${conversationId} does not exist`);
  },

  /**
   * The append with a run's guards (agentRunsRepository): null when one failed, with nothing
   * written; the caller says which.
   */
  appendGuarded: (conversationId: string, drafts: EventDraft[], guard: AppendGuard) =>
    appendGuarded(db, conversationId, drafts, guard),

  /** The whole history in order, unbounded: for tests and tools, never per agent step (readForAgent). */
  async listAll(conversationId: string): Promise<StoredEvent[]> {
    const rows = await db
      .selectFrom("events")
      .selectAll()
      .where("conversation_id", "=", conversationId)
      .orderBy("seq", "asc")
      .execute();
    return rows.map(toStored);
  },

  /**
   * What the agent's next request is built from (the history builder's input): the events from
   * the latest CondensationEvent's `kept_from_seq` on (everything it left in the model's view, and
   * all that came after), and the system prompt and first user message when they come before. So
   * a step reads what the model is shown and a little more, however long the conversation: the
   * condenser keeps that bounded. Range scans of the primary key (conversation_id, seq) and of
   * events_conv_kind_ts_idx.
   */
  async readForAgent(conversationId: string): Promise<AgentHistoryRead> {
    const latest = await db
      .selectFrom("events")
      .select("payload")
      .where("conversation_id", "=", conversationId)
      .where("kind", "=", "CondensationEvent")
      .orderBy("timestamp", "desc")
      .orderBy("seq", "desc")
      .limit(1)
      .executeTakeFirst();
    const kept = (latest?.payload as { kept_from_seq?: unknown } | undefined)?.kept_from_seq;
    const from = typeof kept === "number" && kept > 1 ? kept : 1;
    const recent = (
      await db
        .selectFrom("events")
        .selectAll()
        .where("conversation_id", "=", conversationId)
        .where("seq", ">=", from)
        .orderBy("seq", "asc")
        .execute()
    ).map(toStored);
    if (from <= 1) return { head: [], recent };
    const firstOf = (kind: string, source?: string) => {
      let q = db
        .selectFrom("events")
        .selectAll()
        .where("conversation_id", "=", conversationId)
        .where("kind", "=", kind)
        .where("seq", "<", from);
      if (source) q = q.where("source", "=", source);
      return q.orderBy("timestamp", "asc").orderBy("seq", "asc").limit(1).executeTakeFirst();
    };
    const [system, firstUser] = await Promise.all([firstOf("SystemPromptEvent"), firstOf("MessageEvent", "user")]);
    const head = [system, firstUser]
      .filter((r): r is EventRow => r !== undefined)
      .sort((a, b) => a.seq - b.seq)
      .map(toStored);
    return { head, recent };
  },

  /**
   * The run's LLM responses and whether a pause came, since `sinceSeq` (the run's first event),
   * counted by the database: a long run's steps are not read back at every step for them.
   */
  async runProgress(conversationId: string, sinceSeq: number): Promise<RunProgress> {
    const row = await db
      .selectFrom("events")
      .select([
        sql<string>`count(distinct payload->>'llm_response_id') filter (where source = 'agent' and kind in ('MessageEvent', 'ActionEvent', 'AgentErrorEvent'))`.as(
          "iterations",
        ),
        sql<boolean>`coalesce(bool_or(kind = 'PauseEvent'), false)`.as("paused"),
      ])
      .where("conversation_id", "=", conversationId)
      .where("seq", ">", sinceSeq)
      .executeTakeFirst();
    return { iterations: Number(row?.iterations ?? 0), pauseRequested: row?.paused === true };
  },

  /** The sequence number of the latest run's `running` state change (its first event); null before any run. */
  async lastRunStartSeq(conversationId: string): Promise<number | null> {
    const row = await db
      .selectFrom("events")
      .select("seq")
      .where("conversation_id", "=", conversationId)
      .where("kind", "=", "ConversationStateUpdateEvent")
      .where(sql<boolean>`payload->>'key' = 'execution_status' and payload->>'value' = 'running'`)
      .orderBy("timestamp", "desc")
      .orderBy("seq", "desc")
      .limit(1)
      .executeTakeFirst();
    return row?.seq ?? null;
  },

  /** The skills the conversation's user messages have activated so far (their `activated_skills`). */
  async activatedSkillNames(conversationId: string): Promise<Set<string>> {
    const rows = await db
      .selectFrom("events")
      .select(sql<string>`jsonb_array_elements_text(payload->'activated_skills')`.as("name"))
      .where("conversation_id", "=", conversationId)
      .where("kind", "=", "MessageEvent")
      .where("source", "=", "user")
      .where(sql<boolean>`payload ? 'activated_skills'`)
      .execute();
    return new Set(rows.map((r) => r.name));
  },

  /**
   * The latest successful result of a tool (e.g. task_tracker, whose latest result is the plan in
   * force), or null. A backward range scan of events_conv_kind_ts_idx over the observations.
   */
  async latestObservationOf(conversationId: string, toolName: string): Promise<StoredEvent | null> {
    const row = await db
      .selectFrom("events")
      .selectAll()
      .where("conversation_id", "=", conversationId)
      .where("kind", "=", "ObservationEvent")
      .where(sql<boolean>`payload->>'tool_name' = ${toolName}`)
      .where(sql<boolean>`coalesce((payload->'observation'->>'is_error')::boolean, false) = false`)
      .orderBy("timestamp", "desc")
      .orderBy("seq", "desc")
      .limit(1)
      .executeTakeFirst();
    return row ? toStored(row) : null;
  },

  /**
   * The agent's last answer: its latest `finish` call or its latest message, whichever is newer;
   * null while it has neither. A backward scan of events_conv_ts_idx (conversation, timestamp, seq).
   */
  async lastAgentAnswer(conversationId: string): Promise<StoredEvent | null> {
    const row = await db
      .selectFrom("events")
      .selectAll()
      .where("conversation_id", "=", conversationId)
      .where((eb) =>
        eb.or([
          eb.and([eb("kind", "=", "ActionEvent"), eb(sql`payload->>'tool_name'`, "=", "finish")]),
          eb.and([eb("kind", "=", "MessageEvent"), eb("source", "=", "agent")]),
        ]),
      )
      .orderBy("timestamp", "desc")
      .orderBy("seq", "desc")
      .limit(1)
      .executeTakeFirst();
    return row ? toStored(row) : null;
  },
});

export type EventsRepository = ReturnType<typeof eventsRepository>;
