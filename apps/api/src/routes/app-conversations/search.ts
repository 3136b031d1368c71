import { createRoute, z } from "@hono/zod-openapi";
import { conversationRecordSchema } from "@tern/core";
import { conversationSortKey, conversationsRepository } from "@tern/db";
import type { ApiDeps } from "../../deps.ts";
import { pageQuery, pageSchema, sortedPage } from "../queries.ts";
import { errorResponses, toConversationRecord } from "../records.ts";
import type { Router } from "../router.ts";
import { conversationFilterQuery, conversationSortQuery, filterScope, toConversationFilter } from "./search-filter.ts";

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
    const { limit, page_id, sort_order } = query;
    const userId = c.get("principal").userId;
    const filter = toConversationFilter(query);
    if (!filter) return c.json({ items: [], next_page_id: null }, 200);
    const page = await sortedPage({
      secret: deps.config.cursorSecret,
      scope: filterScope(["app-conversations", userId, sort_order, filter]),
      limit,
      pageId: page_id,
      fetch: (after) =>
        conversationsRepository(deps.db).searchForUser(userId, { limit, filter, order: sort_order, after }),
      keyOf: (conv) => conversationSortKey(conv, sort_order),
      toItem: (conv) => toConversationRecord(conv, deps.config.publicUrl, deps.secretBox),
    });
    return c.json(page, 200);
  });
