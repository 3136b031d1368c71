import { createRoute, z } from "@hono/zod-openapi";
import { parseId } from "@tern/core";
import { conversationsRepository } from "@tern/db";
import type { ApiDeps } from "../../deps.ts";
import { idsQuery } from "../queries.ts";
import { conversationRecordSchema, errorResponses, sessionReadableSecurity, toConversationRecord } from "../records.ts";
import type { Router } from "../router.ts";

const route = createRoute({
  method: "get",
  path: "/api/v1/app-conversations",
  tags: ["Conversations"],
  summary: "Conversations by id, in the order asked; null where unknown or not the caller's",
  description: "A session key (X-Session-API-Key) may read its own conversation here.",
  request: { query: idsQuery },
  security: sessionReadableSecurity,
  responses: {
    200: {
      description: "One entry per id asked",
      content: { "application/json": { schema: z.array(conversationRecordSchema.nullable()) } },
    },
    ...errorResponses,
  },
});

export const registerBatchGetConversations = (router: Router, deps: ApiDeps) =>
  router.openapi(route, async (c) => {
    const principal = c.get("principal");
    const wanted = c.req.valid("query").ids.map(parseId);
    // A session key sees its own conversation and nothing else.
    const allowed = (id: string | null): id is string =>
      id !== null && (principal.kind !== "session" || id === principal.conversationId);
    const found = await conversationsRepository(deps.db).findForUser(principal.userId, wanted.filter(allowed));
    const byId = new Map(found.map((conv) => [conv.id, conv]));
    return c.json(
      wanted.map((id) => {
        const conv = allowed(id) ? byId.get(id) : undefined;
        return conv ? toConversationRecord(conv, deps.config.publicUrl) : null;
      }),
      200,
    );
  });
