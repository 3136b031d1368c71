import { createRoute } from "@hono/zod-openapi";
import { type Conversation, conversationRecordSchema } from "@tern/core";
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

export const registerBatchGetConversations = (router: Router, deps: ApiDeps) => {
  // A conversation's record as JSON, made once per conversation read: the GETs whose reads shared a
  // statement (the read coalescing of conversationsRepository) share its Conversation objects, so
  // the record (its session key opened, its ids and URLs written) and its serialisation are made
  // once for all of them. A later read makes new objects, so nothing here outlives its read.
  const recordJson = new WeakMap<Conversation, string>();
  const jsonOf = (conv: Conversation): string => {
    let json = recordJson.get(conv);
    if (json === undefined) {
      json = JSON.stringify(toConversationRecord(conv, deps.config, deps.secretBox));
      recordJson.set(conv, json);
    }
    return json;
  };
  return router.openapi(route, async (c) => {
    const found = await ownedConversations(deps, c.get("principal"), c.req.valid("query").ids);
    // The records' JSON made before, so not c.json(); the document still describes the array of records.
    return c.body(`[${found.map((conv) => (conv ? jsonOf(conv) : "null")).join(",")}]`, 200, {
      "content-type": "application/json",
    }) as never;
  });
};
