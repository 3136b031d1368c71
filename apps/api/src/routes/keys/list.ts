import { createRoute, z } from "@hono/zod-openapi";
import { apiKeyRecordSchema } from "@tern/core";
import { listApiKeys } from "@tern/services";
import type { ApiDeps } from "../../deps.ts";
import { errorResponses, toApiKeyRecord } from "../records.ts";
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
    const keys = await listApiKeys(deps, c.get("principal").userId);
    return c.json(keys.map(toApiKeyRecord), 200);
  });
