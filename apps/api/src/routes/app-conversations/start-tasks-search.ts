import { createRoute, z } from "@hono/zod-openapi";
import { parseId, startTaskRecordSchema } from "@tern/core";
import { countStartTasks, type StartTaskFilter, searchStartTasks, startTaskSortOrders } from "@tern/services";
import type { ApiDeps } from "../../deps.ts";
import { listingRequest, pageQuery, pageSchema, timeWindowQuery } from "../queries.ts";
import { errorResponses, toStartTaskRecord } from "../records.ts";
import type { Router } from "../router.ts";

/** The filters the start-task search and count share. */
const startTaskFilterQuery = {
  conversation_id__eq: z
    .string()
    .max(200)
    .optional()
    .openapi({ description: "Tasks that made this conversation (app_conversation_id)" }),
  ...timeWindowQuery,
};

/** Null when the filter can match nothing (a conversation id that is no id). */
const toStartTaskFilter = (q: z.output<z.ZodObject<typeof startTaskFilterQuery>>): StartTaskFilter | null => {
  const conversationId = q.conversation_id__eq === undefined ? undefined : parseId(q.conversation_id__eq);
  if (conversationId === null) return null;
  return {
    conversationId,
    createdAtGte: q.created_at__gte,
    createdAtLt: q.created_at__lt,
    updatedAtGte: q.updated_at__gte,
    updatedAtLt: q.updated_at__lt,
  };
};

const searchRoute = createRoute({
  method: "get",
  path: "/api/v1/app-conversations/start-tasks/search",
  tags: ["Start tasks"],
  summary: "The caller's start tasks, filtered and sorted (newest first by default)",
  request: {
    query: z.object({
      ...startTaskFilterQuery,
      sort_order: z
        .enum(startTaskSortOrders)
        .default("CREATED_AT_DESC")
        .openapi({ description: "CREATED_AT_DESC when absent" }),
      ...pageQuery,
    }),
  },
  responses: {
    200: {
      description: "A page",
      content: { "application/json": { schema: pageSchema(startTaskRecordSchema, "StartTaskPage") } },
    },
    ...errorResponses,
  },
});

const countRoute = createRoute({
  method: "get",
  path: "/api/v1/app-conversations/start-tasks/count",
  tags: ["Start tasks"],
  summary: "How many of the caller's start tasks match the filters (a bare integer)",
  request: { query: z.object(startTaskFilterQuery) },
  responses: {
    200: { description: "The count", content: { "application/json": { schema: z.number().int().nonnegative() } } },
    ...errorResponses,
  },
});

export const registerSearchStartTasks = (router: Router, deps: ApiDeps) => {
  router.openapi(searchRoute, async (c) => {
    const query = c.req.valid("query");
    const page = await searchStartTasks(deps, c.get("principal"), listingRequest(query, toStartTaskFilter(query)));
    return c.json(
      { items: page.items.map((t) => toStartTaskRecord(t, deps.config)), next_page_id: page.next_page_id },
      200,
    );
  });
  router.openapi(countRoute, async (c) => {
    return c.json(await countStartTasks(deps, c.get("principal"), toStartTaskFilter(c.req.valid("query"))), 200);
  });
};
