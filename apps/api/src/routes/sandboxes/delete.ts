import { createRoute } from "@hono/zod-openapi";
import { successSchema } from "@tern/core";
import { removeSandbox } from "@tern/services";
import type { ApiDeps } from "../../deps.ts";
import { errorResponses, notFoundResponse } from "../records.ts";
import type { Router } from "../router.ts";
import { commandResponses, sandboxIdParam } from "./sandbox.ts";

const route = createRoute({
  method: "delete",
  path: "/api/v1/sandboxes/{id}",
  tags: ["Sandboxes"],
  summary: "Remove the sandbox; its conversation's record and events are kept",
  description:
    "Answered once the sandbox is gone (status MISSING, and so the conversation's sandbox_status). " +
    "A run in progress ends in `error` at its next tool call. Removing a removed sandbox changes nothing.",
  request: { params: sandboxIdParam },
  responses: {
    200: { description: "Removed", content: { "application/json": { schema: successSchema } } },
    ...errorResponses,
    ...notFoundResponse,
    ...commandResponses,
  },
});

export const registerDeleteSandbox = (router: Router, deps: ApiDeps) =>
  router.openapi(route, async (c) => {
    await removeSandbox(deps, c.get("principal"), c.req.valid("param").id);
    return c.json({ success: true }, 200);
  });
