import { createRoute, z } from "@hono/zod-openapi";
import { deleteSecret } from "@tern/services";
import type { ApiDeps } from "../../deps.ts";
import { errorResponses, notFoundResponse } from "../records.ts";
import type { Router } from "../router.ts";

const deletedSecretSchema = z.object({ name: z.string(), deleted: z.literal(true) }).meta({ id: "DeletedSecret" });

const route = createRoute({
  method: "delete",
  path: "/api/v1/secrets/{name}",
  tags: ["Secrets"],
  summary: "Delete a secret; conversations started after it no longer get it",
  request: { params: z.object({ name: z.string().max(200) }) },
  responses: {
    200: { description: "Deleted", content: { "application/json": { schema: deletedSecretSchema } } },
    ...errorResponses,
    ...notFoundResponse,
  },
});

export const registerDeleteSecret = (router: Router, deps: ApiDeps) =>
  router.openapi(route, async (c) => {
    const { name } = c.req.valid("param");
    await deleteSecret(deps, c.get("principal").userId, name);
    return c.json({ name, deleted: true as const }, 200);
  });
