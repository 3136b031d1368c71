import { createRoute, z } from "@hono/zod-openapi";
import { conversationsRepository } from "@tern/db";
import type { ApiDeps } from "../../deps.ts";
import { newestFirstPage, pageQuery, pageSchema } from "../queries.ts";
import { conversationRecordSchema, errorResponses, toConversationRecord } from "../records.ts";
import type { Router } from "../router.ts";

const route = createRoute({
  method: "get",
  path: "/api/v1/app-conversations/search",
  tags: ["Conversations"],
  summary: "The caller's conversations, newest first",
  request: { query: z.object(pageQuery) },
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
    const { limit, page_id } = c.req.valid("query");
    const userId = c.get("principal").userId;
    const page = await newestFirstPage({
      secret: deps.config.cursorSecret,
      scope: `app-conversations:${userId}`,
      limit,
      pageId: page_id,
      fetch: (after) => conversationsRepository(deps.db).searchForUser(userId, { limit, after }),
      toItem: (conv) => toConversationRecord(conv, deps.config.publicUrl),
    });
    return c.json(page, 200);
  });
