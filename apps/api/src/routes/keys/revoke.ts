import { createRoute, z } from "@hono/zod-openapi";
import { AppError, parseId, toHexId } from "@tern/core";
import { apiKeysRepository } from "@tern/db";
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
      content: { "application/json": { schema: z.object({ id: z.string(), revoked: z.literal(true) }) } },
    },
    ...errorResponses,
    ...notFoundResponse,
  },
});

export const registerRevokeKey = (router: Router, deps: ApiDeps) =>
  router.openapi(route, async (c) => {
    const id = parseId(c.req.valid("param").id);
    const revoked = id !== null && (await apiKeysRepository(deps.db).revoke(c.get("principal").userId, id));
    if (!revoked || id === null) throw new AppError("not_found", "No such API key");
    return c.json({ id: toHexId(id), revoked: true as const }, 200);
  });
