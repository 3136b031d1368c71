import { createRoute, z } from "@hono/zod-openapi";
import { webhookDeliverySchema } from "@tern/core";
import { listWebhookDeliveries } from "@tern/services";
import type { ApiDeps } from "../../deps.ts";
import { pageQuery, pageSchema } from "../queries.ts";
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
    const page = await listWebhookDeliveries(deps, c.get("principal").userId, c.req.valid("param").id, {
      limit,
      pageId: page_id,
    });
    return c.json({ items: page.items.map(toWebhookDeliveryRecord), next_page_id: page.next_page_id }, 200);
  });
