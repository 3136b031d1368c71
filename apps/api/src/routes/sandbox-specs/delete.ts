import { createRoute, z } from "@hono/zod-openapi";
import { offeredImages, removeSandboxSpec } from "@tern/services";
import type { ApiDeps } from "../../deps.ts";
import { errorResponse, errorResponses } from "../records.ts";
import type { Router } from "../router.ts";

const route = createRoute({
  method: "delete",
  path: "/api/v1/sandbox-specs",
  tags: ["Sandboxes"],
  summary: "Remove a spec an admin named (admin keys only)",
  description:
    "tern extension. New starts can no longer pick it; sandboxes running it keep running, and each engine's " +
    "janitor removes its runtime image once none runs from it. The configuration's specs go with the configuration.",
  request: { query: z.object({ id: z.string().min(1).max(255) }) },
  responses: {
    200: { description: "Removed", content: { "application/json": { schema: z.object({ success: z.boolean() }) } } },
    ...errorResponses,
    403: errorResponse("The caller's key is not an admin key"),
    404: errorResponse("No spec an admin named has this id"),
  },
});

export const registerDeleteSandboxSpec = (router: Router, deps: ApiDeps) =>
  router.openapi(route, async (c) => {
    await removeSandboxSpec(deps, c.get("principal"), c.req.valid("query").id, offeredImages(deps.config));
    return c.json({ success: true }, 200);
  });
