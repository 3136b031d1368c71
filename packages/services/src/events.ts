import { parseId, type StoredEvent } from "@tern/core";
import {
  type EventFilter,
  type EventOrder,
  type EventPage,
  type EventPosition,
  eventsSearchRepository,
} from "@tern/db";
import { z } from "zod";
import { type Caller, conversationIdFor, ownedConversation } from "./ownership.ts";
import { decodePageCursor, encodePageCursor, type Page, type PagedReadDeps } from "./paging.ts";

/** The filters of an event search or count, but the conversation (which the caller's id names). */
export type EventQuery = Omit<EventFilter, "conversationId" | "ownerId">;

const position = z.object({ t: z.string().min(1), s: z.number().int().nonnegative() });

// The cursor is bound to everything that defines the result set, so it cannot be replayed elsewhere.
const cursorScope = (f: EventFilter, order: EventOrder) =>
  [
    "events",
    f.conversationId,
    f.kind ?? "",
    f.timestampGte ?? "",
    f.timestampLt ?? "",
    order,
    // Only when set, so cursors issued before these filters existed stay valid.
    ...(f.source !== undefined || f.body !== undefined ? [f.source ?? "", f.body ?? ""] : []),
  ].join("|");

/**
 * A page of the caller's conversation's events, in (timestamp, seq) order or its reverse.
 * Following next_page_id returns every matching event exactly once, even while events are appended.
 * One round trip: the page's own statement checks the owner (the search is the hot read); only
 * an empty answer (or a bad cursor) asks whether the conversation is the caller's, for the 404.
 */
export const searchEvents = async (
  deps: PagedReadDeps,
  caller: Caller,
  rawConversationId: string,
  req: { query: EventQuery; order: EventOrder; limit: number; pageId: string | undefined },
): Promise<Page<StoredEvent>> => {
  const conversationId = conversationIdFor(caller, rawConversationId);
  const notOwned = () => ownedConversation(deps, caller, rawConversationId);
  const filter: EventFilter = { ...req.query, conversationId };
  const scope = cursorScope(filter, req.order);
  let after: z.infer<typeof position> | null = null;
  try {
    after = req.pageId ? decodePageCursor(deps.config.cursorSecret, scope, req.pageId, position) : null;
  } catch (err) {
    // Another user's conversation is 404 whatever its cursor.
    await notOwned();
    throw err;
  }
  const page = await eventsSearchRepository(deps.db).page({
    filter: { ...filter, ownerId: caller.userId },
    order: req.order,
    after: after && { timestamp: after.t, seq: after.s },
    limit: req.limit,
  });
  // Nothing found may mean "not yours": 404 then, as for any other read.
  if (page.events.length === 0) await notOwned();
  const last = page.events.at(-1);
  const next =
    page.hasMore && last ? encodePageCursor(deps.config.cursorSecret, scope, { t: last.timestamp, s: last.seq }) : null;
  return { items: page.events, next_page_id: next };
};

/** How many of the caller's conversation's events match. */
export const countEvents = async (
  deps: Pick<PagedReadDeps, "db">,
  caller: Caller,
  rawConversationId: string,
  query: EventQuery,
): Promise<number> => {
  const { id } = await ownedConversation(deps, caller, rawConversationId);
  return eventsSearchRepository(deps.db).count({ ...query, conversationId: id });
};

/** The caller's conversation's events among `rawEventIds`, in the order asked; null where unknown. */
export const eventsByIds = async (
  deps: Pick<PagedReadDeps, "db">,
  caller: Caller,
  rawConversationId: string,
  rawEventIds: readonly string[],
): Promise<(StoredEvent | null)[]> => {
  const { id: conversationId } = await ownedConversation(deps, caller, rawConversationId);
  // Event ids are uuids; one written as 32 hex is read as the same uuid.
  const wanted = rawEventIds.map(parseId);
  const found = await eventsSearchRepository(deps.db).getByIds(
    conversationId,
    wanted.filter((id): id is string => id !== null),
  );
  const byId = new Map(found.map((e) => [e.id, e]));
  return wanted.map((id) => (id === null ? null : (byId.get(id) ?? null)));
};

/** The position of an event of the conversation named by its id; null when it has none such. */
export const eventPositionOf = (
  deps: Pick<PagedReadDeps, "db">,
  conversationId: string,
  eventId: string,
): Promise<EventPosition | null> => eventsSearchRepository(deps.db).positionOf(conversationId, eventId);

/** The position of the conversation's latest event (a stream that starts "now" starts after it). */
export const latestEventPosition = (
  deps: Pick<PagedReadDeps, "db">,
  conversationId: string,
): Promise<EventPosition | null> => eventsSearchRepository(deps.db).latestPosition(conversationId);

/** What the event reads need. */
export type EventReadDeps = Pick<PagedReadDeps, "db">;

/** The events after `after` that match `filter`, oldest first: a live stream's catch-up read. */
export const eventsAfter = (
  db: EventReadDeps["db"],
  filter: EventFilter,
  after: EventPosition | null,
  limit: number,
): Promise<EventPage> => eventsSearchRepository(db).page({ filter, order: "asc", after, limit });
