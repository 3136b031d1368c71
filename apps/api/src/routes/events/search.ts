import { createRoute, z } from "@hono/zod-openapi";
import { eventSchema, eventToJson } from "@tern/core";
import { type EventFilter, type EventOrder, eventsSearchRepository } from "@tern/db";
import { conversationIdFor, ownedConversation } from "@tern/services";
import type { ApiDeps } from "../../deps.ts";
import { decodePageCursor, encodePageCursor } from "../../page-cursor.ts";
import { pageQuery, pageSchema } from "../queries.ts";
import { errorResponses, notFoundResponse, sessionReadableSecurity } from "../records.ts";
import type { Router } from "../router.ts";
import { conversationParam, eventFilterQuery, toEventFilter } from "./filter.ts";

const route = createRoute({
  method: "get",
  path: "/api/v1/conversation/{conversation_id}/events/search",
  tags: ["Events"],
  summary: "Search a conversation's events",
  description:
    "Items in ascending (timestamp, sequence) order, or descending with sort_order=TIMESTAMP_DESC. Following next_page_id returns every matching event exactly once, even while events are appended.",
  request: {
    params: conversationParam,
    query: z.object({
      ...eventFilterQuery,
      sort_order: z.enum(["TIMESTAMP", "TIMESTAMP_DESC"]).default("TIMESTAMP"),
      ...pageQuery,
    }),
  },
  security: sessionReadableSecurity,
  responses: {
    200: {
      description: "A page of events",
      content: { "application/json": { schema: pageSchema(eventSchema, "EventPage") } },
    },
    ...errorResponses,
    ...notFoundResponse,
  },
});

const position = z.object({ t: z.string().min(1), s: z.number().int().nonnegative() });

// The cursor is bound to everything that defines the result set, so it cannot be replayed elsewhere.
const cursorScope = (f: EventFilter, order: EventOrder) =>
  ["events", f.conversationId, f.kind ?? "", f.timestampGte ?? "", f.timestampLt ?? "", order].join("|");

export const registerSearchEvents = (router: Router, deps: ApiDeps) =>
  router.openapi(route, async (c) => {
    const query = c.req.valid("query");
    const caller = c.get("principal");
    const rawId = c.req.valid("param").conversation_id;
    // One round trip: the page's own statement checks the owner (the search is the hot read).
    const conversationId = conversationIdFor(caller, rawId);
    const notOwned = () => ownedConversation(deps, caller, rawId);
    const filter = toEventFilter(conversationId, query);
    const order: EventOrder = query.sort_order === "TIMESTAMP_DESC" ? "desc" : "asc";
    const scope = cursorScope(filter, order);
    let after: z.infer<typeof position> | null = null;
    try {
      after = query.page_id ? decodePageCursor(deps.config.cursorSecret, scope, query.page_id, position) : null;
    } catch (err) {
      // Another user's conversation is 404 whatever its cursor.
      await notOwned();
      throw err;
    }
    const page = await eventsSearchRepository(deps.db).page({
      filter: { ...filter, ownerId: caller.userId },
      order,
      after: after && { timestamp: after.t, seq: after.s },
      limit: query.limit,
    });
    // Nothing found may mean "not yours": 404 then, as for any other read.
    if (page.events.length === 0) await notOwned();
    const last = page.events.at(-1);
    const next =
      page.hasMore && last
        ? encodePageCursor(deps.config.cursorSecret, scope, { t: last.timestamp, s: last.seq })
        : null;
    return c.json({ items: page.events.map(eventToJson), next_page_id: next }, 200);
  });
