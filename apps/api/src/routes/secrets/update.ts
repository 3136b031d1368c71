import { createRoute, z } from "@hono/zod-openapi";
import { secretRecordSchema, updateSecretRequestSchema } from "@tern/core";
import { updateSecret } from "@tern/services";
import type { ApiDeps } from "../../deps.ts";
import { errorResponses, notFoundResponse } from "../records.ts";
import type { Router } from "../router.ts";
import { toSecretRecord } from "./record.ts";

const route = createRoute({
  method: "put",
  path: "/api/v1/secrets/{name}",
  tags: ["Secrets"],
  summary: "Change a secret's value and/or description",
  request: {
    params: z.object({ name: z.string().max(200) }),
    body: { required: true, content: { "application/json": { schema: updateSecretRequestSchema } } },
  },
  responses: {
    200: { description: "Changed", content: { "application/json": { schema: secretRecordSchema } } },
    ...errorResponses,
    ...notFoundResponse,
  },
});

export const registerUpdateSecret = (router: Router, deps: ApiDeps) =>
  router.openapi(route, async (c) => {
    const secret = await updateSecret(deps, c.get("principal").userId, c.req.valid("param").name, c.req.valid("json"));
    return c.json(toSecretRecord(secret), 200);
  });
