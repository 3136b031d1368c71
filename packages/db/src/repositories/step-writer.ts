import { type EventDraft, metrics, newId, type StoredEvent } from "@tern/core";
import { type Kysely, sql } from "kysely";
import type { Database } from "../schema.ts";
import type { MetricsChange } from "./metrics.ts";
import { turnPump } from "./turn-pump.ts";

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
 * is already being written, and two cores each run one. Never two writes of one conversation at
 * once, so no two groups lock the same row and none can deadlock another. Two against one, full
 * bench, same machine: 64 runs 25-45k events/s (five runs) against 28k (two); 8 runs 13-17k either way.
 */
const MAX_IN_FLIGHT = 2;
/**
 * Writes waiting per group free to go, below which they go as one group even when a second could go
 * beside it (with two free: fewer than 32 waiting stay one group).
 */
const MIN_SPLIT_WRITES = 16;

interface Pending {
  step: StepWrite;
  resolve: (done: StepWritten) => void;
  reject: (err: unknown) => void;
}

/** One write's conversation row after the update: where its events' seqs and timestamps end. */
interface WrittenRow {
  w: number;
  /** As text, like the timestamp: whatever type parsers the pool has. */
  last_seq: string;
  last_event_at: string;
  metrics: Record<string, number> | null;
}

/** "2026-11-27T05:00:00.123456Z" (six fraction digits, connection.ts) and back, in microseconds. */
const isoToMicros = (iso: string): number => Date.parse(`${iso.slice(0, 23)}Z`) * 1_000 + Number(iso.slice(23, 26));
const microsToIso = (us: number): string => {
  const ms = Math.floor(us / 1_000);
  return `${new Date(ms).toISOString().slice(0, 23)}${String(us - ms * 1_000).padStart(3, "0")}Z`;
};

/**
 * A write's events as stored: its drafts (the payloads as sent: typed by their constructors, so
 * not parsed back), with the seqs and timestamps the statement gave them: the last ones are the
 * conversation's `last_seq` and `last_event_at`, and each earlier event is one seq and one
 * microsecond before the next (as the insert computes them).
 */
const storedEvents = (step: StepWrite, ids: string[], row: WrittenRow): StoredEvent[] => {
  const n = step.drafts.length;
  const last = isoToMicros(row.last_event_at);
  const lastSeq = Number(row.last_seq);
  return step.drafts.map(
    (d, i) =>
      ({
        id: ids[i] as string,
        conversationId: step.conversationId,
        seq: lastSeq - n + 1 + i,
        kind: d.kind,
        source: d.source,
        timestamp: microsToIso(last - (n - 1 - i)),
        payload: d.payload,
      }) as StoredEvent,
  );
};

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
  const ids = steps.map((s) => s.drafts.map((d) => d.id ?? newId()));
  const events = steps.flatMap((s, w) =>
    s.drafts.map((d, i) => ({
      w,
      ord: i + 1,
      id: ids[w]?.[i],
      kind: d.kind,
      source: d.source,
      payload: d.payload,
    })),
  );
  const result = await sql<WrittenRow>`
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
    v as (
      select * from jsonb_to_recordset(${JSON.stringify(events)}::jsonb)
        as v(w int, ord int, id uuid, kind text, source text, payload jsonb)
    ),
    -- Nothing returned: the seqs and timestamps follow from each row's last_seq and
    -- last_event_at (storedEvents), and the payloads are the drafts'. Sending them back (jsonb
    -- out, JSON parsed and checked again) cost more than the insert itself.
    ins as (
      insert into events (conversation_id, seq, id, kind, source, "timestamp", payload)
      select c.id, c.last_seq - c.n + v.ord, v.id, v.kind, v.source,
             c.last_event_at - (c.n - v.ord) * interval '1 microsecond', v.payload
      from c join v on v.w = c.w
      order by c.id, v.ord
    ),
    -- The webhook outbox, in this same statement, as every event writer writes it
    -- (tern_event_webhooks): only for the group's conversations whose user has a live webhook
    -- (most have none: then nothing below runs).
    hooked as materialized (
      select c.w, c.id, c.n, c.last_seq, c.last_event_at, c.user_id
      from c
      where exists (select 1 from webhooks wh where wh.user_id = c.user_id and wh.deleted_at is null)
    ),
    outbox as (
      select tern_event_webhooks(h.id, h.user_id, jsonb_agg(jsonb_build_object(
               'id', v.id, 'kind', v.kind, 'source', v.source,
               'timestamp', tern_iso(h.last_event_at - (h.n - v.ord) * interval '1 microsecond'),
               'payload', v.payload) order by v.ord))
      from hooked h join v on v.w = h.w
      group by h.id, h.user_id
    )
    select c.w, c.last_seq::int8::text as last_seq,
           to_char(c.last_event_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') as last_event_at,
           case when c.has_metrics then c.metrics end as metrics
    from c
    -- Referenced, so the outbox is written (a plain select in WITH runs only when read).
    where (select count(*) from outbox) >= 0
  `.execute(db);
  const out: StepWritten[] = steps.map(() => null);
  for (const row of result.rows) {
    const step = steps[row.w] as StepWrite;
    metrics.eventsAppended.inc(step.drafts.length);
    out[row.w] = { events: storedEvents(step, ids[row.w] as string[], row), metrics: row.metrics ?? {} };
  }
  return out;
};

/** An error Postgres answered with (a SQLSTATE): the statement did not run, so nothing of it committed. */
const isServerError = (err: unknown): boolean =>
  typeof (err as { code?: unknown })?.code === "string" && /^[0-9A-Z]{5}$/.test((err as { code: string }).code);

/**
 * Group commit of the agent's step writes: the writes of every run in this process
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
  const stats: StepWriterStats = { groups: 0, writes: 0, fallbacks: 0 };

  const takeGroup = (): Pending[] => {
    const group: Pending[] = [];
    const seen = new Set<string>();
    let events = 0;
    // With more than one group free to go and enough waiting, the writes are shared among them:
    // groups in flight at once run on as many connections (and cores) instead of one after another.
    // A few writes stay one group (one statement is cheaper than two; 8 runs gained nothing split).
    const free = maxInFlight - pump.inFlight();
    const limit = Math.min(
      MAX_GROUP_WRITES,
      queue.length >= free * MIN_SPLIT_WRITES ? Math.ceil(queue.length / free) : MAX_GROUP_WRITES,
    );
    for (let i = 0; i < queue.length && group.length < limit; ) {
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

  const pump = turnPump({
    maxInFlight,
    waiting: () => queue.length,
    take: () => {
      const group = takeGroup();
      if (group.length === 0) return null;
      for (const p of group) writing.add(p.step.conversationId);
      return group;
    },
    run: (group) =>
      settle(group).finally(() => {
        for (const p of group) writing.delete(p.step.conversationId);
      }),
  });

  return {
    stats,
    write(step) {
      return new Promise<StepWritten>((resolve, reject) => {
        queue.push({ step, resolve, reject });
        pump.schedule();
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
