import { createRoute, z } from "@hono/zod-openapi";
import { conversationRecordSchema } from "@tern/core";
import { searchConversations } from "@tern/services";
import type { ApiDeps } from "../../deps.ts";
import { listingRequest, pageQuery, pageSchema } from "../queries.ts";
import { errorResponses, toConversationRecord } from "../records.ts";
import type { Router } from "../router.ts";
import { conversationFilterQuery, conversationSortQuery, toConversationFilter } from "./search-filter.ts";

const route = createRoute({
  method: "get",
  path: "/api/v1/app-conversations/search",
  tags: ["Conversations"],
  summary: "The caller's conversations, filtered and sorted (newest first by default)",
  description:
    "OpenHands' filters and sort orders. `page_id` is an opaque cursor bound to the filters and order; " +
    "GET /count with the same filters gives the total.",
  request: { query: z.object({ ...conversationFilterQuery, ...conversationSortQuery, ...pageQuery }) },
  responses: {
    200: {
      description: "A page",
      content: { "application/json": { schema: pageSchema(conversationRecordSchema, "AppConversationPage") } },
    },
    ...errorResponses,
  },
});

export const registerSearchConversations = (router: Router, deps: ApiDeps) =>
  router.openapi(route, async (c) => {
    const query = c.req.valid("query");
    const page = await searchConversations(
      deps,
      c.get("principal"),
      listingRequest(query, toConversationFilter(query)),
    );
    const items = page.items.map((conv) => toConversationRecord(conv, deps.config, deps.secretBox));
    return c.json({ items, next_page_id: page.next_page_id }, 200);
  });
