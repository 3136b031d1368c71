import { createRoute, z } from "@hono/zod-openapi";
import { webhookRecordSchema } from "@tern/core";
import { listWebhooks } from "@tern/services";
import type { ApiDeps } from "../../deps.ts";
import { errorResponses } from "../records.ts";
import type { Router } from "../router.ts";
import { toWebhookRecord } from "./records.ts";

const route = createRoute({
  method: "get",
  path: "/api/v1/webhooks",
  tags: ["Webhooks"],
  summary: "The caller's webhooks (never their secrets), newest first",
  responses: {
    200: { description: "The webhooks", content: { "application/json": { schema: z.array(webhookRecordSchema) } } },
    ...errorResponses,
  },
});

export const registerListWebhooks = (router: Router, deps: ApiDeps) =>
  router.openapi(route, async (c) => {
    const webhooks = await listWebhooks(deps, c.get("principal").userId);
    return c.json(webhooks.map(toWebhookRecord), 200);
  });
