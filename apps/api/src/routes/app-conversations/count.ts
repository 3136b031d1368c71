import { createRoute, z } from "@hono/zod-openapi";
import { countConversations } from "@tern/services";
import type { ApiDeps } from "../../deps.ts";
import { errorResponses } from "../records.ts";
import type { Router } from "../router.ts";
import { conversationFilterQuery, toConversationFilter } from "./search-filter.ts";

const route = createRoute({
  method: "get",
  path: "/api/v1/app-conversations/count",
  tags: ["Conversations"],
  summary: "How many of the caller's conversations match the filters (a bare integer, as OpenHands answers)",
  request: { query: z.object(conversationFilterQuery) },
  responses: {
    200: { description: "The count", content: { "application/json": { schema: z.number().int().nonnegative() } } },
    ...errorResponses,
  },
});

export const registerCountConversations = (router: Router, deps: ApiDeps) =>
  router.openapi(route, async (c) => {
    const filter = toConversationFilter(c.req.valid("query"));
    return c.json(await countConversations(deps, c.get("principal"), filter), 200);
  });
