import { createRoute, z } from "@hono/zod-openapi";
import { NotFoundError } from "@tern/core";
import { sandboxSecretNames, sandboxSecretValue } from "@tern/services";
import type { ApiDeps } from "../../deps.ts";
import { errorResponse } from "../records.ts";
import type { Router } from "../router.ts";

/**
 * The sandbox-scoped settings routes (OpenHands Cloud's, which `OpenHandsCloudWorkspace.get_secrets`
 * and `_get_secret_value` call): authenticated by the sandbox's session key (X-Session-API-Key),
 * which middleware/auth.ts (SANDBOX_SETTINGS_PATH) checks names THIS sandbox before these run; `principal` is its owner.
 */
const security = [{ sessionApiKey: [] }];
const params = z.object({
  id: z.string().openapi({ param: { name: "id", in: "path" } }),
});
const unauthorized = errorResponse("No session key, or not this sandbox's (another sandbox's key, an API key)");

const listRoute = createRoute({
  method: "get",
  path: "/api/v1/sandboxes/{id}/settings/secrets",
  tags: ["Sandboxes"],
  summary: "The names (and descriptions) of the sandbox owner's secrets, for its session key",
  security,
  request: { params },
  responses: {
    200: {
      description: "The secrets' names; values by GET .../secrets/{name}",
      content: {
        "application/json": {
          schema: z.object({
            secrets: z.array(z.object({ name: z.string(), description: z.string().nullable() })),
          }),
        },
      },
    },
    401: unauthorized,
  },
});

const valueRoute = createRoute({
  method: "get",
  path: "/api/v1/sandboxes/{id}/settings/secrets/{name}",
  tags: ["Sandboxes"],
  summary: "One secret's value, as plain text, for the sandbox's session key",
  security,
  request: { params: params.extend({ name: z.string().openapi({ param: { name: "name", in: "path" } }) }) },
  responses: {
    200: { description: "The value", content: { "text/plain": { schema: z.string() } } },
    401: unauthorized,
    404: errorResponse("The owner has no secret of that name"),
  },
});

export const registerSandboxSettingsSecrets = (router: Router, deps: ApiDeps) => {
  router.openapi(listRoute, async (c) => {
    const secrets = await sandboxSecretNames(deps, c.get("principal").userId);
    return c.json({ secrets }, 200);
  });
  router.openapi(valueRoute, async (c) => {
    const { name } = c.req.valid("param");
    const value = await sandboxSecretValue(deps, c.get("principal").userId, name);
    if (value === null) throw new NotFoundError(`No secret named ${name}`);
    return c.text(value, 200);
  });
};
