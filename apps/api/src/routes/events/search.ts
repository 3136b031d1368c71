import { createRoute, z } from "@hono/zod-openapi";
import { eventSchema, eventToJson } from "@tern/core";
import { searchEvents } from "@tern/services";
import type { ApiDeps } from "../../deps.ts";
import { pageQuery, pageSchema } from "../queries.ts";
import { errorResponses, notFoundResponse, sessionReadableSecurity } from "../records.ts";
import type { Router } from "../router.ts";
import { conversationParam, eventFilterQuery, toEventQuery } from "./filter.ts";

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

export const registerSearchEvents = (router: Router, deps: ApiDeps) =>
  router.openapi(route, async (c) => {
    const query = c.req.valid("query");
    const page = await searchEvents(deps, c.get("principal"), c.req.valid("param").conversation_id, {
      query: toEventQuery(query),
      order: query.sort_order === "TIMESTAMP_DESC" ? "desc" : "asc",
      limit: query.limit,
      pageId: query.page_id,
    });
    return c.json({ items: page.items.map(eventToJson), next_page_id: page.next_page_id }, 200);
  });
