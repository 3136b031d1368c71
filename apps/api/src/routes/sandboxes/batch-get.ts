import { createRoute } from "@hono/zod-openapi";
import { sandboxRecordSchema } from "@tern/core";
import { ownedSandboxes } from "@tern/services";
import type { ApiDeps } from "../../deps.ts";
import { batchSchema, idQuery } from "../queries.ts";
import { errorResponses, toSandboxRecord } from "../records.ts";
import type { Router } from "../router.ts";

const route = createRoute({
  method: "get",
  path: "/api/v1/sandboxes",
  tags: ["Sandboxes"],
  summary: "Sandboxes by id, in the order asked; null where unknown or not the caller's",
  request: { query: idQuery },
  responses: {
    200: {
      description: "One entry per id asked",
      content: { "application/json": { schema: batchSchema(sandboxRecordSchema) } },
    },
    ...errorResponses,
  },
});

export const registerBatchGetSandboxes = (router: Router, deps: ApiDeps) =>
  router.openapi(route, async (c) => {
    const found = await ownedSandboxes(deps, c.get("principal"), c.req.valid("query").id);
    return c.json(
      found.map((s) => (s ? toSandboxRecord(s, deps.secretBox, deps.config) : null)),
      200,
    );
  });
