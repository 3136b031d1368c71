import { createRoute, z } from "@hono/zod-openapi";
import { startTasksRepository } from "@tern/db";
import type { ApiDeps } from "../../deps.ts";
import { newestFirstPage, pageQuery, pageSchema } from "../queries.ts";
import { errorResponses, startTaskRecordSchema, toStartTaskRecord } from "../records.ts";
import type { Router } from "../router.ts";

const route = createRoute({
  method: "get",
  path: "/api/v1/app-conversations/start-tasks/search",
  tags: ["Start tasks"],
  summary: "The caller's start tasks, newest first",
  request: { query: z.object(pageQuery) },
  responses: {
    200: {
      description: "A page",
      content: { "application/json": { schema: pageSchema(startTaskRecordSchema, "StartTaskPage") } },
    },
    ...errorResponses,
  },
});

export const registerSearchStartTasks = (router: Router, deps: ApiDeps) =>
  router.openapi(route, async (c) => {
    const { limit, page_id } = c.req.valid("query");
    const userId = c.get("principal").userId;
    const page = await newestFirstPage({
      secret: deps.config.cursorSecret,
      scope: `start-tasks:${userId}`,
      limit,
      pageId: page_id,
      fetch: (after) => startTasksRepository(deps.db).searchForUser(userId, { limit, after }),
      toItem: toStartTaskRecord,
    });
    return c.json(page, 200);
  });
