import { createRoute } from "@hono/zod-openapi";
import { createdWebhookSchema, createWebhookRequestSchema } from "@tern/core";
import { registerWebhook } from "@tern/services";
import type { ApiDeps } from "../../deps.ts";
import { errorResponses } from "../records.ts";
import type { Router } from "../router.ts";
import { toWebhookRecord, webhookDepsOf } from "./records.ts";

const route = createRoute({
  method: "post",
  path: "/api/v1/webhooks",
  tags: ["Webhooks"],
  summary: "Register a webhook for the caller's start tasks and conversations",
  description:
    "Deliveries are POSTed as JSON `{type, timestamp, data}`, signed with the Standard Webhooks scheme " +
    "(`webhook-id`, `webhook-timestamp`, `webhook-signature`), and retried with exponential backoff for 24 h. " +
    "The URL must be https and must not resolve to a private, loopback or link-local address (422), " +
    "unless the operator allows it.",
  request: { body: { required: true, content: { "application/json": { schema: createWebhookRequestSchema } } } },
  responses: {
    201: {
      description: "The webhook, with its signing secret shown once",
      content: { "application/json": { schema: createdWebhookSchema } },
    },
    ...errorResponses,
  },
});

export const registerCreateWebhook = (router: Router, deps: ApiDeps) =>
  router.openapi(route, async (c) => {
    const { webhook, secret } = await registerWebhook(
      webhookDepsOf(deps),
      c.get("principal").userId,
      c.req.valid("json"),
    );
    return c.json({ ...toWebhookRecord(webhook), secret }, 201);
  });
