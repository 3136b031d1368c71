import { type EventKind, parseStoredEvent, type StoredEvent } from "@tern/core";
import { type CompiledQuery, type Kysely, sql } from "kysely";
import type { Database } from "../schema.ts";

/** What a client may filter a conversation's events by. Times are ISO 8601 strings with an explicit zone. */
export interface EventFilter {
  conversationId: string;
  /**
   * Only while the conversation is this user's: the owner check rides in the same statement (a
   * primary-key probe run once), so a request reads its page in one round trip. A conversation that
   * is not theirs reads as empty; the caller tells "empty" from "not yours" only then.
   */
  ownerId?: string;
  kind?: EventKind;
  /** Inclusive lower bound. */
  timestampGte?: string;
  /** Exclusive upper bound. */
  timestampLt?: string;
  /** Only events of this source (agent, user, environment). */
  source?: string;
  /** Only MessageEvents whose text contains this, case-insensitive (the agent server's `body`). */
  body?: string;
}

/** A place in the (timestamp, seq) order: the last event a page returned. */
export interface EventPosition {
  timestamp: string;
  seq: number;
}

export type EventOrder = "asc" | "desc";

export interface EventPageRequest {
  filter: EventFilter;
  order: EventOrder;
  /** Events strictly after this position in `order` (keyset paging, never an offset). */
  after?: EventPosition | null;
  limit: number;
}

export interface EventPage {
  events: StoredEvent[];
  /** True when at least one more matching event follows the page. */
  hasMore: boolean;
}

interface SelectedRow {
  id: string;
  seq: number;
  kind: string;
  source: string;
  timestamp: string;
  payload: unknown;
}

/**
 * A selected row as an event of `conversationId`. The row is copied field by field, not spread
 * (`{ ...r, conversationId }`): pg's rows spread slowly, and the spread's result slowed the
 * payload's parse too (~3 × the parse of a page of 100, measured on the events search).
 */
const toEvent = (r: SelectedRow, conversationId: string): StoredEvent =>
  parseStoredEvent({
    id: r.id,
    conversationId,
    seq: r.seq,
    kind: r.kind,
    source: r.source,
    timestamp: r.timestamp,
    payload: r.payload,
  });

export const eventsSearchRepository = (db: Kysely<Database>) => {
  const filtered = (f: EventFilter) => {
    let q = db.selectFrom("events").where("conversation_id", "=", f.conversationId);
    const ownerId = f.ownerId;
    if (ownerId !== undefined)
      q = q.where(({ exists, selectFrom }) =>
        exists(
          selectFrom("conversations")
            .select("conversations.id")
            .where("conversations.id", "=", f.conversationId)
            .where("conversations.user_id", "=", ownerId),
        ),
      );
    if (f.kind !== undefined) q = q.where("kind", "=", f.kind);
    // Bound as text with its zone and cast by Postgres, so microseconds survive (a JS Date drops them).
    if (f.timestampGte !== undefined) q = q.where("timestamp", ">=", sql<string>`${f.timestampGte}::timestamptz`);
    if (f.timestampLt !== undefined) q = q.where("timestamp", "<", sql<string>`${f.timestampLt}::timestamptz`);
    if (f.source !== undefined) q = q.where("source", "=", f.source);
    if (f.body !== undefined) {
      const pattern = `%${f.body.replace(/[\\%_]/g, (ch) => `\\${ch}`)}%`;
      q = q
        .where("kind", "=", "MessageEvent")
        .where(
          sql<boolean>`exists (select 1 from jsonb_array_elements(coalesce(payload->'llm_message'->'content', '[]'::jsonb)) b where b->>'text' ilike ${pattern})`,
        );
    }
    return q;
  };

  /**
   * One page as a single statement. `conversation_id = $1 [and kind = $2]` plus the row comparison
   * `("timestamp", seq) > ($t, $s)` is a range of events_conv_ts_idx (or events_conv_kind_ts_idx
   * with a kind), read in index order and stopped after limit + 1 rows, whatever the depth.
   */
  const pageQuery = (req: EventPageRequest) => {
    let q = filtered(req.filter).select(["id", "seq", "kind", "source", "timestamp", "payload"]);
    if (req.after) {
      const op = req.order === "asc" ? sql.raw(">") : sql.raw("<");
      q = q.where(
        sql<boolean>`("timestamp", seq) ${op} (${req.after.timestamp}::timestamptz, ${req.after.seq}::bigint)`,
      );
    }
    return q
      .orderBy("timestamp", req.order)
      .orderBy("seq", req.order)
      .limit(req.limit + 1);
  };

  return {
    /** The SQL a page issues, for EXPLAIN in tests and benchmarks. */
    compilePage(req: EventPageRequest): CompiledQuery {
      return pageQuery(req).compile();
    },

    async page(req: EventPageRequest): Promise<EventPage> {
      const rows = await pageQuery(req).execute();
      const hasMore = rows.length > req.limit;
      const n = hasMore ? req.limit : rows.length;
      const events = new Array<StoredEvent>(n);
      for (let i = 0; i < n; i++) events[i] = toEvent(rows[i] as SelectedRow, req.filter.conversationId);
      return { events, hasMore };
    },

    /** The conversation's events among `ids` (any order; unknown ids are absent): events_conv_id_idx. */
    async getByIds(conversationId: string, ids: string[]): Promise<StoredEvent[]> {
      if (ids.length === 0) return [];
      const rows = await db
        .selectFrom("events")
        .select(["id", "seq", "kind", "source", "timestamp", "payload"])
        .where("conversation_id", "=", conversationId)
        .where("id", "in", ids)
        .execute();
      return rows.map((r) => toEvent(r, conversationId));
    },

    /** The position of one event of the conversation, named by its id; null when it has none such. */
    async positionOf(conversationId: string, eventId: string): Promise<EventPosition | null> {
      const row = await db
        .selectFrom("events")
        .select(["timestamp", "seq"])
        .where("conversation_id", "=", conversationId)
        .where("id", "=", eventId)
        .executeTakeFirst();
      return row ? { timestamp: row.timestamp, seq: row.seq } : null;
    },

    /** The position of the conversation's latest event; null before its first. */
    async latestPosition(conversationId: string): Promise<EventPosition | null> {
      const row = await db
        .selectFrom("events")
        .select(["timestamp", "seq"])
        .where("conversation_id", "=", conversationId)
        .orderBy(sql`"timestamp"`, "desc")
        .orderBy("seq", "desc")
        .limit(1)
        .executeTakeFirst();
      return row ? { timestamp: row.timestamp, seq: row.seq } : null;
    },

    /** How many events match; an index-only range of the same index as the search. */
    async count(filter: EventFilter): Promise<number> {
      const { n } = await filtered(filter)
        .select((eb) => eb.fn.countAll<number>().as("n"))
        .executeTakeFirstOrThrow();
      return Number(n);
    },
  };
};

export type EventsSearchRepository = ReturnType<typeof eventsSearchRepository>;
