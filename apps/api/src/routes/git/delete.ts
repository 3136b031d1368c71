import { createRoute, z } from "@hono/zod-openapi";
import { toHexId } from "@tern/core";
import { deleteGitProvider } from "@tern/services";
import type { ApiDeps } from "../../deps.ts";
import { errorResponses, notFoundResponse } from "../records.ts";
import type { Router } from "../router.ts";

const route = createRoute({
  method: "delete",
  path: "/api/v1/git/providers/{id}",
  tags: ["Git providers"],
  summary: "Remove one of the caller's git accounts; later clones and pushes go without it",
  request: { params: z.object({ id: z.string().openapi({ description: "Account id (32 hex or uuid)" }) }) },
  responses: {
    200: {
      description: "Removed",
      content: { "application/json": { schema: z.object({ id: z.string(), deleted: z.literal(true) }) } },
    },
    ...errorResponses,
    ...notFoundResponse,
  },
});

export const registerDeleteGitProvider = (router: Router, deps: ApiDeps) =>
  router.openapi(route, async (c) => {
    const id = await deleteGitProvider(deps, c.get("principal").userId, c.req.valid("param").id);
    return c.json({ id: toHexId(id), deleted: true as const }, 200);
  });
