import { createRoute, z } from "@hono/zod-openapi";
import { revokedApiKeySchema, toHexId } from "@tern/core";
import { revokeApiKey } from "@tern/services";
import type { ApiDeps } from "../../deps.ts";
import { errorResponses, notFoundResponse } from "../records.ts";
import type { Router } from "../router.ts";

const route = createRoute({
  method: "delete",
  path: "/api/keys/{id}",
  tags: ["API keys"],
  summary: "Revoke one of the caller's keys; it is refused from the next request on",
  request: { params: z.object({ id: z.string().openapi({ description: "Key id (32 hex or uuid)" }) }) },
  responses: {
    200: {
      description: "Revoked",
      content: { "application/json": { schema: revokedApiKeySchema } },
    },
    ...errorResponses,
    ...notFoundResponse,
  },
});

export const registerRevokeKey = (router: Router, deps: ApiDeps) =>
  router.openapi(route, async (c) => {
    const id = await revokeApiKey(
      { db: deps.db, credentialEvents: deps.keyCache },
      c.get("principal").userId,
      c.req.valid("param").id,
    );
    return c.json({ id: toHexId(id), revoked: true as const }, 200);
  });
