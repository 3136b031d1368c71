import { createRoute, z } from "@hono/zod-openapi";
import { conversationsRepository } from "@tern/db";
import type { ApiDeps } from "../../deps.ts";
import { decodePageCursor, encodePageCursor } from "../../page-cursor.ts";
import { createdPosition, pageQuery, pageSchema } from "../queries.ts";
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
    const scope = `app-conversations:${userId}`;
    const after = page_id ? decodePageCursor(deps.config.cursorSecret, scope, page_id, createdPosition) : null;
    const rows = await conversationsRepository(deps.db).searchForUser(userId, {
      limit,
      after: after && { createdAt: after.t, id: after.id },
    });
    const items = rows.slice(0, limit);
    const last = items.at(-1);
    const next =
      rows.length > limit && last
        ? encodePageCursor(deps.config.cursorSecret, scope, { t: last.createdAt, id: last.id })
        : null;
    return c.json(
      { items: items.map((conv) => toConversationRecord(conv, deps.config.publicUrl)), next_page_id: next },
      200,
    );
  });
