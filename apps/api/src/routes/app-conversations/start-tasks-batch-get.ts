import { createRoute } from "@hono/zod-openapi";
import { startTaskRecordSchema } from "@tern/core";
import { ownedStartTasks } from "@tern/services";
import type { ApiDeps } from "../../deps.ts";
import { batchSchema, idsQuery } from "../queries.ts";
import { errorResponses, toStartTaskRecord } from "../records.ts";
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
      content: { "application/json": { schema: batchSchema(startTaskRecordSchema) } },
    },
    ...errorResponses,
  },
});

export const registerBatchGetStartTasks = (router: Router, deps: ApiDeps) =>
  router.openapi(route, async (c) => {
    const found = await ownedStartTasks(deps, c.get("principal").userId, c.req.valid("query").ids);
    return c.json(
      found.map((task) => (task ? toStartTaskRecord(task, deps.config) : null)),
      200,
    );
  });
