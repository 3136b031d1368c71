import { createRoute } from "@hono/zod-openapi";
import { eventSchema, eventToJson, parseId } from "@tern/core";
import { eventsSearchRepository } from "@tern/db";
import { ownedConversation } from "@tern/services";
import type { ApiDeps } from "../../deps.ts";
import { batchSchema, idQuery } from "../queries.ts";
import { errorResponses, notFoundResponse, sessionReadableSecurity } from "../records.ts";
import type { Router } from "../router.ts";
import { conversationParam } from "./filter.ts";

const route = createRoute({
  method: "get",
  path: "/api/v1/conversation/{conversation_id}/events",
  tags: ["Events"],
  summary: "A conversation's events by id, in the order asked; null where unknown",
  description: "`id` repeated once per event (OpenHands spells it `id` here). Another user's conversation is 404.",
  request: { params: conversationParam, query: idQuery },
  security: sessionReadableSecurity,
  responses: {
    200: {
      description: "One entry per id asked",
      content: { "application/json": { schema: batchSchema(eventSchema) } },
    },
    ...errorResponses,
    ...notFoundResponse,
  },
});

// Event ids are uuids; one written as 32 hex is read as the same uuid.
const eventIdOf = (raw: string): string | null => parseId(raw);

export const registerBatchGetEvents = (router: Router, deps: ApiDeps) =>
  router.openapi(route, async (c) => {
    const { id: conversationId } = await ownedConversation(
      deps,
      c.get("principal"),
      c.req.valid("param").conversation_id,
    );
    const wanted = c.req.valid("query").id.map(eventIdOf);
    const found = await eventsSearchRepository(deps.db).getByIds(
      conversationId,
      wanted.filter((id): id is string => id !== null),
    );
    const byId = new Map(found.map((e) => [e.id, e]));
    return c.json(
      wanted.map((id) => {
        const event = id === null ? undefined : byId.get(id);
        return event ? eventToJson(event) : null;
      }),
      200,
    );
  });
