import { type EventKind, type EventSource, newId, type StoredEvent } from "@tern/core";
import { type Kysely, sql } from "kysely";
import type { Database } from "../schema.ts";

export interface EventDraft {
  kind: EventKind;
  source: EventSource;
  payload: Record<string, unknown>;
  /** Callers that must not write an event twice pass a stable id. */
  id?: string;
}

interface AppendedRow {
  id: string;
  seq: number;
  kind: string;
  source: string;
  timestamp: string;
  payload: Record<string, unknown>;
}

export const eventsRepository = (db: Kysely<Database>) => ({
  /**
   * Appends events in order, in one statement. The conversation row is the per-conversation
   * counter: its row lock serialises appenders, so sequence numbers and timestamps are strictly
   * increasing and commit in order (a reader's keyset cursor never skips a late commit).
   */
  async append(
    conversationId: string,
    drafts: EventDraft[],
    /** onlyIfEmpty: appends nothing (returns []) when the conversation has events already, atomically. */
    opts: { onlyIfEmpty?: boolean } = {},
  ): Promise<StoredEvent[]> {
    if (drafts.length === 0) return [];
    const n = drafts.length;
    const rows = drafts.map((d, i) => ({
      ord: i + 1,
      id: d.id ?? newId(),
      kind: d.kind,
      source: d.source,
      payload: d.payload,
    }));
    const result = await sql<AppendedRow>`
      with c as (
        update conversations
        set last_seq = last_seq + ${n},
            last_event_at = greatest(clock_timestamp(), coalesce(last_event_at, '-infinity'::timestamptz) + interval '1 microsecond')
                            + (${n}::int - 1) * interval '1 microsecond'
        where id = ${conversationId} ${opts.onlyIfEmpty ? sql`and last_seq = 0` : sql``}
        returning last_seq, last_event_at
      )
      insert into events (conversation_id, seq, id, kind, source, "timestamp", payload)
      select ${conversationId}, c.last_seq - ${n} + v.ord, v.id, v.kind, v.source,
             c.last_event_at - (${n}::int - v.ord) * interval '1 microsecond', v.payload
      from c, jsonb_to_recordset(${JSON.stringify(rows)}::jsonb)
           as v(ord int, id uuid, kind text, source text, payload jsonb)
      order by v.ord
      returning id, seq, kind, source, "timestamp", payload
    `.execute(db);
    if (result.rows.length === 0 && opts.onlyIfEmpty) return [];
    if (result.rows.length !== n) throw new Error(`conversation ${conversationId} does not exist`);
    return result.rows.map((r) => ({
      id: r.id,
      conversationId,
      seq: r.seq,
      kind: r.kind as EventKind,
      source: r.source as EventSource,
      timestamp: r.timestamp,
      payload: r.payload,
    }));
  },

  /** The whole history in order; for the agent to rebuild its state (not for client paging). */
  async listAll(conversationId: string): Promise<StoredEvent[]> {
    const rows = await db
      .selectFrom("events")
      .selectAll()
      .where("conversation_id", "=", conversationId)
      .orderBy("seq", "asc")
      .execute();
    return rows.map((r) => ({
      id: r.id,
      conversationId: r.conversation_id,
      seq: r.seq,
      kind: r.kind as EventKind,
      source: r.source as EventSource,
      timestamp: r.timestamp,
      payload: r.payload,
    }));
  },
});

export type EventsRepository = ReturnType<typeof eventsRepository>;
