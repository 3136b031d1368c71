import { createRoute, z } from "@hono/zod-openapi";
import { parseId } from "@tern/core";
import { startTasksRepository } from "@tern/db";
import type { ApiDeps } from "../../deps.ts";
import { idsQuery } from "../queries.ts";
import { errorResponses, startTaskRecordSchema, toStartTaskRecord } from "../records.ts";
import type { Router } from "../router.ts";

const route = createRoute({
  method: "get",
  path: "/api/v1/app-conversations/start-tasks",
  tags: ["Start tasks"],
  summary: "Start tasks by id, in the order asked; null where unknown or not the caller's",
  request: { query: idsQuery },
  responses: {
    200: {
      description: "One entry per id asked",
      content: { "application/json": { schema: z.array(startTaskRecordSchema.nullable()) } },
    },
    ...errorResponses,
  },
});

export const registerBatchGetStartTasks = (router: Router, deps: ApiDeps) =>
  router.openapi(route, async (c) => {
    const userId = c.get("principal").userId;
    const wanted = c.req.valid("query").ids.map(parseId);
    const ids = wanted.filter((id): id is string => id !== null);
    const found = await startTasksRepository(deps.db).findForUser(userId, ids);
    const byId = new Map(found.map((task) => [task.id, task]));
    return c.json(
      wanted.map((id) => {
        const task = id === null ? undefined : byId.get(id);
        return task ? toStartTaskRecord(task) : null;
      }),
      200,
    );
  });
