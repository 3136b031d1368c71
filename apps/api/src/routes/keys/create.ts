import { createRoute } from "@hono/zod-openapi";
import { createApiKeyRequestSchema, createdApiKeySchema, toHexId } from "@tern/core";
import { issueApiKey } from "@tern/services";
import type { ApiDeps } from "../../deps.ts";
import { errorResponses, toApiKeyRecord } from "../records.ts";
import type { Router } from "../router.ts";

const route = createRoute({
  method: "post",
  path: "/api/keys",
  tags: ["API keys"],
  summary: "Create an API key for the caller's user",
  request: { body: { required: false, content: { "application/json": { schema: createApiKeyRequestSchema } } } },
  responses: {
    201: { description: "The new key, shown once", content: { "application/json": { schema: createdApiKeySchema } } },
    ...errorResponses,
  },
});

export const registerCreateKey = (router: Router, deps: ApiDeps) =>
  router.openapi(route, async (c) => {
    const input = c.req.valid("json");
    const { apiKey, key } = await issueApiKey(
      {
        db: deps.db,
        maxKeyLifetimeDays: deps.config.API_KEY_MAX_LIFETIME_DAYS,
        maxKeysPerUser: deps.config.MAX_KEYS_PER_USER,
      },
      c.get("principal").userId,
      { name: input.name, expiresAt: input.expires_at },
    );
    const record = toApiKeyRecord(apiKey);
    return c.json(
      {
        id: toHexId(apiKey.id),
        name: record.name,
        key,
        prefix: record.prefix,
        created_at: record.created_at,
        expires_at: record.expires_at,
      },
      201,
    );
  });
