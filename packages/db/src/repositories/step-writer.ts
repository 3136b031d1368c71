import { type EventDraft, metrics, newId, parseStoredEvent, type StoredEvent } from "@tern/core";
import { type Kysely, sql } from "kysely";
import type { Database } from "../schema.ts";
import type { MetricsChange } from "./metrics.ts";

/** One run's step write: its events in order, under its lease, with the LLM usage it adds. */
export interface StepWrite {
  conversationId: string;
  lease: { runId: string; attempt: number };
  drafts: EventDraft[];
  maxEvents?: number;
  metrics?: MetricsChange;
}

/** A step written, or refused (null: the lease or the event limit failed; nothing written). */
export type StepWritten = { events: StoredEvent[]; metrics: Record<string, number> } | null;

export interface StepWriterStats {
  /** Statements (so commits) issued, and the step writes they carried. */
  groups: number;
  writes: number;
  /** Groups that failed as a whole and were written again one write at a time. */
  fallbacks: number;
}

export interface StepWriter {
  write(step: StepWrite): Promise<StepWritten>;
  readonly stats: StepWriterStats;
}

/** A group's bound: one statement's parameters stay a few hundred KiB at most. */
const MAX_GROUP_WRITES = 256;
const MAX_GROUP_EVENTS = 4_096;
/**
 * Groups committed at once, on as many connections: while one commits (its WAL flush), the next
 * is already being written. Never two writes of one conversation at once, so no two groups lock
 * the same row and none can deadlock another.
 */
const MAX_IN_FLIGHT = 1;

interface Pending {
  step: StepWrite;
  resolve: (done: StepWritten) => void;
  reject: (err: unknown) => void;
}

interface AppendedRow {
  w: number;
  id: string;
  seq: number;
  kind: string;
  source: string;
  timestamp: string;
  payload: unknown;
  metrics: Record<string, number>;
}

/** What a change adds and sets, as JSON the statement applies (metricsChange's semantics, per row). */
const metricsJson = (m: MetricsChange | undefined) => {
  if (!m) return { madd: null, mset: null };
  const madd: Record<string, number> = {};
  const mset: Record<string, number> = {};
  for (const [k, v] of Object.entries(m.add ?? {})) if (typeof v === "number" && v !== 0) madd[k] = v;
  for (const [k, v] of Object.entries(m.set ?? {})) if (typeof v === "number" && Number.isFinite(v)) mset[k] = v;
  return { madd, mset };
};

/**
 * The steps of a group in ONE statement, so one transaction and one commit (one WAL flush, one
 * NOTIFY per conversation): the conversations' rows updated (each row's counter and guards: the
 * lease, the event limit; the row lock the update takes is the one the run's `begin` and `end`
 * take), the events of every step whose row was updated inserted after it, and the webhook
 * outbox. A step whose guard fails updates no row, so inserts nothing, and the statement goes on
 * for the others: it fails alone, it cannot poison the group. At most one write per conversation
 * in a group (the caller's queue keeps the others for the next), so a row is updated once.
 */
const writeGroup = async (db: Kysely<Database>, steps: StepWrite[]): Promise<StepWritten[]> => {
  const writes = steps.map((s, w) => ({
    w,
    conversation_id: s.conversationId,
    run_id: s.lease.runId,
    attempt: s.lease.attempt,
    n: s.drafts.length,
    max_events: s.maxEvents ?? null,
    has_metrics: !!s.metrics,
    ...metricsJson(s.metrics),
  }));
  const events = steps.flatMap((s, w) =>
    s.drafts.map((d, i) => ({
      w,
      ord: i + 1,
      id: d.id ?? newId(),
      kind: d.kind,
      source: d.source,
      payload: d.payload,
    })),
  );
  const result = await sql<AppendedRow>`
    with g as (
      select * from jsonb_to_recordset(${JSON.stringify(writes)}::jsonb)
        as g(w int, conversation_id uuid, run_id uuid, attempt int, n int, max_events int,
             has_metrics boolean, madd jsonb, mset jsonb)
    ),
    c as (
      update conversations co
      set last_seq = co.last_seq + g.n,
          last_event_at = greatest(clock_timestamp(), coalesce(co.last_event_at, '-infinity'::timestamptz) + interval '1 microsecond')
                          + (g.n - 1) * interval '1 microsecond',
          metrics = case when g.has_metrics then
                      co.metrics
                      || coalesce((select jsonb_object_agg(a.key, to_jsonb(coalesce((co.metrics->>a.key)::numeric, 0) + a.value::numeric))
                                   from jsonb_each_text(g.madd) a), '{}'::jsonb)
                      || coalesce(g.mset, '{}'::jsonb)
                    else co.metrics end,
          updated_at = case when g.has_metrics then clock_timestamp() else co.updated_at end
      from g
      where co.id = g.conversation_id
        and co.active_run_id = g.run_id and co.run_attempt = g.attempt
        and (g.max_events is null or co.last_seq + g.n <= g.max_events)
      returning g.w, g.n, co.id, co.last_seq, co.last_event_at, co.user_id, co.metrics, g.has_metrics
    ),
    ins as (
      insert into events (conversation_id, seq, id, kind, source, "timestamp", payload)
      select c.id, c.last_seq - c.n + v.ord, v.id, v.kind, v.source,
             c.last_event_at - (c.n - v.ord) * interval '1 microsecond', v.payload
      from c
      join jsonb_to_recordset(${JSON.stringify(events)}::jsonb)
           as v(w int, ord int, id uuid, kind text, source text, payload jsonb) on v.w = c.w
      order by c.id, v.ord
      returning conversation_id, id, seq, kind, source, "timestamp", payload
    ),
    -- The webhook outbox, as eventsRepository's append writes it, in this same statement.
    outbox as (
      insert into webhook_deliveries (webhook_id, event_type, data)
      select w.id, x.type, x.data
      from ins
      join c on c.id = ins.conversation_id
      join webhooks w on w.user_id = c.user_id and w.deleted_at is null
      cross join lateral (
        select to_char(ins."timestamp" at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') as ts
      ) t
      cross join lateral (values
        ('conversation.event', jsonb_build_object(
           'conversation_id', replace(ins.conversation_id::text, '-', ''),
           'event', ins.payload || jsonb_build_object('id', ins.id, 'kind', ins.kind, 'source', ins.source, 'timestamp', t.ts))),
        ('conversation.execution_status', case
           when ins.kind = 'ConversationStateUpdateEvent' and ins.payload->>'key' = 'execution_status'
           then jsonb_build_object(
             'conversation_id', replace(ins.conversation_id::text, '-', ''),
             'execution_status', ins.payload->'value',
             'event_id', ins.id,
             'timestamp', t.ts)
           end)
      ) as x(type, data)
      where x.data is not null and x.type = any(w.events)
      order by ins.conversation_id, ins.seq
    )
    select c.w, ins.id, ins.seq, ins.kind, ins.source, ins."timestamp", ins.payload,
           case when c.has_metrics then c.metrics end as metrics
    from ins join c on c.id = ins.conversation_id
    order by c.w, ins.seq
  `.execute(db);
  const out: StepWritten[] = steps.map(() => null);
  const byWrite = new Map<number, AppendedRow[]>();
  for (const r of result.rows) {
    const list = byWrite.get(r.w);
    if (list) list.push(r);
    else byWrite.set(r.w, [r]);
  }
  for (const [w, rows] of byWrite) {
    const step = steps[w] as StepWrite;
    if (rows.length !== step.drafts.length) {
      throw new Error(`append to ${step.conversationId}: ${rows.length} of ${step.drafts.length} events`);
    }
    metrics.eventsAppended.inc(rows.length);
    out[w] = {
      events: rows.map(({ w: _w, metrics: _m, ...r }) =>
        parseStoredEvent({ ...r, conversationId: step.conversationId }),
      ),
      metrics: rows[0]?.metrics ?? {},
    };
  }
  return out;
};

/** An error Postgres answered with (a SQLSTATE): the statement did not run, so nothing of it committed. */
const isServerError = (err: unknown): boolean =>
  typeof (err as { code?: unknown })?.code === "string" && /^[0-9A-Z]{5}$/.test((err as { code: string }).code);

/**
 * Group commit of the agent's step writes (issue 23 §4): the writes of every run in this process
 * that arrive while a group is being committed are gathered and committed together, in one
 * statement, as soon as that commit returns (the first write of an idle writer goes at the end of
 * the current turn of the event loop, with whatever arrived in it: no timer, no waiting for
 * company). Each caller resumes once its own step is committed (or refused), so durability is
 * what it was: a step is acknowledged only after its commit, with `synchronous_commit` as set.
 *
 * Ordering: a run waits for each step before writing the next, and a conversation appears at most
 * once in a group (a second write for it, from a stale attempt say, waits for the next group, in
 * arrival order), so a conversation's writes commit in the order they were asked for.
 *
 * A group that fails as a whole (an error from Postgres: a malformed event, a statement timeout)
 * is written again one step at a time, each its own statement, so only the step at fault fails.
 * A lost connection fails the group's callers, as it failed the one caller before: whether it
 * committed is unknown, and writing again could write twice.
 */
export const createStepWriter = (db: Kysely<Database>, opts: { maxInFlight?: number } = {}): StepWriter => {
  const maxInFlight = opts.maxInFlight ?? MAX_IN_FLIGHT;
  const queue: Pending[] = [];
  /** Conversations with a write in a group being committed: their next write waits for it. */
  const writing = new Set<string>();
  let inFlight = 0;
  let scheduled = false;
  const stats: StepWriterStats = { groups: 0, writes: 0, fallbacks: 0 };

  const takeGroup = (): Pending[] => {
    const group: Pending[] = [];
    const seen = new Set<string>();
    let events = 0;
    for (let i = 0; i < queue.length && group.length < MAX_GROUP_WRITES; ) {
      const p = queue[i] as Pending;
      const id = p.step.conversationId;
      const n = p.step.drafts.length;
      if (seen.has(id) || writing.has(id) || (group.length > 0 && events + n > MAX_GROUP_EVENTS)) {
        // Kept, and so are the conversation's later writes (seen): its writes stay in order.
        seen.add(id);
        i++;
        continue;
      }
      seen.add(id);
      events += n;
      group.push(p);
      queue.splice(i, 1);
    }
    return group;
  };

  const settle = async (group: Pending[]) => {
    stats.groups++;
    stats.writes += group.length;
    try {
      const done = await writeGroup(
        db,
        group.map((p) => p.step),
      );
      for (const [i, p] of group.entries()) p.resolve(done[i] ?? null);
    } catch (err) {
      if (group.length === 1 || !isServerError(err)) {
        for (const p of group) p.reject(err);
        return;
      }
      stats.fallbacks++;
      await Promise.all(
        group.map(async (p) => {
          try {
            p.resolve((await writeGroup(db, [p.step]))[0] ?? null);
          } catch (e) {
            p.reject(e);
          }
        }),
      );
    }
  };

  const pump = () => {
    scheduled = false;
    while (inFlight < maxInFlight && queue.length > 0) {
      const group = takeGroup();
      if (group.length === 0) return;
      inFlight++;
      for (const p of group) writing.add(p.step.conversationId);
      void settle(group).finally(() => {
        inFlight--;
        for (const p of group) writing.delete(p.step.conversationId);
        schedule();
      });
    }
  };

  // At the end of this turn of the event loop: the callers a commit just resumed (and whatever
  // else arrived meanwhile) have asked for their next write by then, and go together.
  const schedule = () => {
    if (scheduled || queue.length === 0 || inFlight >= maxInFlight) return;
    scheduled = true;
    setImmediate(pump);
  };

  return {
    stats,
    write(step) {
      return new Promise<StepWritten>((resolve, reject) => {
        queue.push({ step, resolve, reject });
        schedule();
      });
    },
  };
};

const writers = new WeakMap<Kysely<Database>, StepWriter>();

/** The process's step writer on this database handle: one per pool, so all its runs share a group. */
export const stepWriterOf = (db: Kysely<Database>): StepWriter => {
  let w = writers.get(db);
  if (!w) {
    w = createStepWriter(db);
    writers.set(db, w);
  }
  return w;
};
