import { createRoute } from "@hono/zod-openapi";
import { conversationRecordSchema } from "@tern/core";
import { ownedConversations } from "@tern/services";
import type { ApiDeps } from "../../deps.ts";
import { batchSchema, idsQuery } from "../queries.ts";
import { errorResponses, sessionReadableSecurity, toConversationRecord } from "../records.ts";
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
      content: { "application/json": { schema: batchSchema(conversationRecordSchema) } },
    },
    ...errorResponses,
  },
});

export const registerBatchGetConversations = (router: Router, deps: ApiDeps) =>
  router.openapi(route, async (c) => {
    const found = await ownedConversations(deps, c.get("principal"), c.req.valid("query").ids);
    return c.json(
      found.map((conv) => (conv ? toConversationRecord(conv, deps.config, deps.secretBox) : null)),
      200,
    );
  });
