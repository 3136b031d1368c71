import { type EventKind, parseStoredEvent, type StoredEvent } from "@tern/core";
import { CompiledQuery, type Kysely, sql } from "kysely";
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

/** An event's columns as a statement selects them (its timestamp formatted as the API's). */
export interface EventColumns {
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
export const toEvent = (r: EventColumns, conversationId: string): StoredEvent =>
  parseStoredEvent({
    id: r.id,
    conversationId,
    seq: r.seq,
    kind: r.kind,
    source: r.source,
    timestamp: r.timestamp,
    payload: r.payload,
  });

/** A page's statement for one shape of request, compiled once, and where each parameter comes from. */
interface PageTemplate {
  sql: string;
  parameters: ((req: EventPageRequest) => unknown)[];
}

/**
 * Stand-ins compiled in place of a request's values to learn where each lands among the
 * statement's parameters (strings with a NUL, which no request can carry: Postgres keeps none).
 */
const SENTINEL = {
  conversationId: "\u0000conversation",
  ownerId: "\u0000owner",
  kind: "\u0000kind" as EventKind,
  timestampGte: "\u0000gte",
  timestampLt: "\u0000lt",
  source: "\u0000source",
  afterTimestamp: "\u0000after",
  afterSeq: -7_777_777,
  limit: -5_555_555,
};

const sentinelSources = new Map<unknown, (req: EventPageRequest) => unknown>([
  [SENTINEL.conversationId, (r) => r.filter.conversationId],
  [SENTINEL.ownerId, (r) => r.filter.ownerId],
  [SENTINEL.kind, (r) => r.filter.kind],
  [SENTINEL.timestampGte, (r) => r.filter.timestampGte],
  [SENTINEL.timestampLt, (r) => r.filter.timestampLt],
  [SENTINEL.source, (r) => r.filter.source],
  [SENTINEL.afterTimestamp, (r) => r.after?.timestamp],
  [SENTINEL.afterSeq, (r) => r.after?.seq],
  [SENTINEL.limit + 1, (r) => r.limit + 1],
]);

/** Which filters a request sets, its order and whether it has a cursor; null for a body search (not templated). */
const shapeOf = (req: EventPageRequest): string | null => {
  const f = req.filter;
  if (f.body !== undefined) return null;
  const has = (v: unknown) => (v === undefined ? "0" : "1");
  return `${req.order}${has(req.after ?? undefined)}${has(f.ownerId)}${has(f.kind)}${has(f.timestampGte)}${has(f.timestampLt)}${has(f.source)}`;
};

/** The request of `shape`'s kind made of stand-ins. */
const sentinelRequest = (req: EventPageRequest): EventPageRequest => {
  const f = req.filter;
  const pick = <K extends keyof typeof SENTINEL>(k: K, v: unknown) => (v === undefined ? {} : { [k]: SENTINEL[k] });
  return {
    order: req.order,
    limit: SENTINEL.limit,
    after: req.after ? { timestamp: SENTINEL.afterTimestamp, seq: SENTINEL.afterSeq } : null,
    filter: {
      conversationId: SENTINEL.conversationId,
      ...pick("ownerId", f.ownerId),
      ...pick("kind", f.kind),
      ...pick("timestampGte", f.timestampGte),
      ...pick("timestampLt", f.timestampLt),
      ...pick("source", f.source),
    },
  };
};

/** Per Kysely instance (its dialect compiles): shape → template, or null where one could not be made. */
const templatesOf = new WeakMap<Kysely<Database>, Map<string, PageTemplate | null>>();

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

  /**
   * The page's statement without building it: Kysely's builder and compiler cost the hot search
   * more than its own parameters do, and a shape of request always compiles to the same text.
   * Made once per shape by compiling stand-ins and finding where each landed; a shape whose
   * parameters are not all stand-ins (none today) is built per request as before.
   */
  const templateOf = (req: EventPageRequest): PageTemplate | null => {
    const shape = shapeOf(req);
    if (shape === null) return null;
    let templates = templatesOf.get(db);
    if (!templates) {
      templates = new Map();
      templatesOf.set(db, templates);
    }
    let template = templates.get(shape);
    if (template === undefined) {
      const compiled = pageQuery(sentinelRequest(req)).compile();
      const sources = compiled.parameters.map((p) => sentinelSources.get(p));
      template = sources.every((x) => x !== undefined)
        ? { sql: compiled.sql, parameters: sources as PageTemplate["parameters"] }
        : null;
      templates.set(shape, template);
    }
    return template;
  };

  return {
    /** The SQL a page issues, for EXPLAIN in tests and benchmarks. */
    compilePage(req: EventPageRequest): CompiledQuery {
      return pageQuery(req).compile();
    },

    async page(req: EventPageRequest): Promise<EventPage> {
      const template = templateOf(req);
      const rows = template
        ? (
            await db.executeQuery<EventColumns>(
              CompiledQuery.raw(
                template.sql,
                template.parameters.map((p) => p(req)),
              ),
            )
          ).rows
        : await pageQuery(req).execute();
      const hasMore = rows.length > req.limit;
      const n = hasMore ? req.limit : rows.length;
      const events = new Array<StoredEvent>(n);
      for (let i = 0; i < n; i++) events[i] = toEvent(rows[i] as EventColumns, req.filter.conversationId);
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
