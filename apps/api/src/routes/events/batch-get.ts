import { createRoute } from "@hono/zod-openapi";
import { eventSchema, eventToJson } from "@tern/core";
import { eventsByIds } from "@tern/services";
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

export const registerBatchGetEvents = (router: Router, deps: ApiDeps) =>
  router.openapi(route, async (c) => {
    const { conversation_id } = c.req.valid("param");
    const events = await eventsByIds(deps, c.get("principal"), conversation_id, c.req.valid("query").id);
    return c.json(
      events.map((event) => (event ? eventToJson(event) : null)),
      200,
    );
  });
