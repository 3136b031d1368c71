import { createRoute, z } from "@hono/zod-openapi";
import { countEvents } from "@tern/services";
import type { ApiDeps } from "../../deps.ts";
import { errorResponses, notFoundResponse, sessionReadableSecurity } from "../records.ts";
import type { Router } from "../router.ts";
import { conversationParam, eventFilterQuery, toEventQuery } from "./filter.ts";

const route = createRoute({
  method: "get",
  path: "/api/v1/conversation/{conversation_id}/events/count",
  tags: ["Events"],
  summary: "How many of a conversation's events match the filters (a bare integer, as OpenHands answers)",
  request: { params: conversationParam, query: z.object(eventFilterQuery) },
  security: sessionReadableSecurity,
  responses: {
    200: { description: "The count", content: { "application/json": { schema: z.number().int().nonnegative() } } },
    ...errorResponses,
    ...notFoundResponse,
  },
});

export const registerCountEvents = (router: Router, deps: ApiDeps) =>
  router.openapi(route, async (c) => {
    const query = toEventQuery(c.req.valid("query"));
    return c.json(await countEvents(deps, c.get("principal"), c.req.valid("param").conversation_id, query), 200);
  });
