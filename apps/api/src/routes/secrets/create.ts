import { createRoute } from "@hono/zod-openapi";
import { createSecretRequestSchema, secretRecordSchema } from "@tern/core";
import { createSecret } from "@tern/services";
import type { ApiDeps } from "../../deps.ts";
import { errorResponse, errorResponses } from "../records.ts";
import type { Router } from "../router.ts";
import { toSecretRecord } from "./record.ts";

const route = createRoute({
  method: "post",
  path: "/api/v1/secrets",
  tags: ["Secrets"],
  summary:
    "Store a secret (sealed with AES-256-GCM): an environment variable of the agent's commands, masked as <secret:NAME> in events",
  request: { body: { required: true, content: { "application/json": { schema: createSecretRequestSchema } } } },
  responses: {
    201: {
      description: "Stored (the value is never shown again)",
      content: { "application/json": { schema: secretRecordSchema } },
    },
    ...errorResponses,
    409: errorResponse("The caller has a secret of that name"),
  },
});

export const registerCreateSecret = (router: Router, deps: ApiDeps) =>
  router.openapi(route, async (c) => {
    const secret = await createSecret(deps, c.get("principal").userId, c.req.valid("json"));
    return c.json(toSecretRecord(secret), 201);
  });
