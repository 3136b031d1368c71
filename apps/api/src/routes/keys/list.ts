import { createRoute, z } from "@hono/zod-openapi";
import { apiKeysRepository } from "@tern/db";
import type { ApiDeps } from "../../deps.ts";
import { apiKeyRecordSchema, errorResponses, toApiKeyRecord } from "../records.ts";
import type { Router } from "../router.ts";

const route = createRoute({
  method: "get",
  path: "/api/keys",
  tags: ["API keys"],
  summary: "List the caller's live keys (never their secrets), newest first",
  responses: {
    200: { description: "The keys", content: { "application/json": { schema: z.array(apiKeyRecordSchema) } } },
    ...errorResponses,
  },
});

export const registerListKeys = (router: Router, deps: ApiDeps) =>
  router.openapi(route, async (c) => {
    const keys = await apiKeysRepository(deps.db).listForUser(c.get("principal").userId);
    return c.json(keys.map(toApiKeyRecord), 200);
  });
