import { createRoute, z } from "@hono/zod-openapi";
import { webhookDeliverySchema } from "@tern/core";
import { webhooksRepository } from "@tern/db";
import { getOwnWebhook } from "@tern/services";
import type { ApiDeps } from "../../deps.ts";
import { newestFirstPage, pageQuery, pageSchema } from "../queries.ts";
import { errorResponses, notFoundResponse } from "../records.ts";
import type { Router } from "../router.ts";
import { toWebhookDeliveryRecord } from "./records.ts";

const route = createRoute({
  method: "get",
  path: "/api/v1/webhooks/{id}/deliveries",
  tags: ["Webhooks"],
  summary: "A webhook's deliveries, newest first, each with its attempts",
  request: {
    params: z.object({ id: z.string().openapi({ description: "Webhook id (32 hex or uuid)" }) }),
    query: z.object(pageQuery),
  },
  responses: {
    200: {
      description: "A page",
      content: { "application/json": { schema: pageSchema(webhookDeliverySchema, "WebhookDeliveryPage") } },
    },
    ...errorResponses,
    ...notFoundResponse,
  },
});

export const registerListWebhookDeliveries = (router: Router, deps: ApiDeps) =>
  router.openapi(route, async (c) => {
    const { limit, page_id } = c.req.valid("query");
    const webhook = await getOwnWebhook(deps, c.get("principal").userId, c.req.valid("param").id);
    const page = await newestFirstPage({
      secret: deps.config.cursorSecret,
      scope: `webhook-deliveries:${webhook.id}`,
      limit,
      pageId: page_id,
      fetch: (after) => webhooksRepository(deps.db).listDeliveries(webhook.id, { limit, after }),
      toItem: toWebhookDeliveryRecord,
    });
    return c.json(page, 200);
  });
