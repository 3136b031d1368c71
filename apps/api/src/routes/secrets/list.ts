import { createRoute } from "@hono/zod-openapi";
import { secretListSchema } from "@tern/core";
import { listSecrets } from "@tern/services";
import type { ApiDeps } from "../../deps.ts";
import { errorResponses } from "../records.ts";
import type { Router } from "../router.ts";
import { toSecretRecord } from "./record.ts";

const route = createRoute({
  method: "get",
  path: "/api/v1/secrets",
  tags: ["Secrets"],
  summary: "The caller's secrets: names and descriptions, never values",
  responses: {
    200: { description: "The secrets, by name", content: { "application/json": { schema: secretListSchema } } },
    ...errorResponses,
  },
});

export const registerListSecrets = (router: Router, deps: ApiDeps) =>
  router.openapi(route, async (c) => {
    const secrets = await listSecrets(deps, c.get("principal").userId);
    return c.json({ custom_secrets: secrets.map(toSecretRecord) }, 200);
  });
