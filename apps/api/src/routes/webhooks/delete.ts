import { createRoute, z } from "@hono/zod-openapi";
import { deletedWebhookSchema, toHexId } from "@tern/core";
import { deleteWebhook } from "@tern/services";
import type { ApiDeps } from "../../deps.ts";
import { errorResponses, notFoundResponse } from "../records.ts";
import type { Router } from "../router.ts";

const route = createRoute({
  method: "delete",
  path: "/api/v1/webhooks/{id}",
  tags: ["Webhooks"],
  summary: "Delete one of the caller's webhooks; its pending deliveries are dropped (marked failed)",
  request: { params: z.object({ id: z.string().openapi({ description: "Webhook id (32 hex or uuid)" }) }) },
  responses: {
    200: { description: "Deleted", content: { "application/json": { schema: deletedWebhookSchema } } },
    ...errorResponses,
    ...notFoundResponse,
  },
});

export const registerDeleteWebhook = (router: Router, deps: ApiDeps) =>
  router.openapi(route, async (c) => {
    const id = await deleteWebhook(deps, c.get("principal").userId, c.req.valid("param").id);
    return c.json({ id: toHexId(id), deleted: true as const }, 200);
  });
