import { createRoute } from "@hono/zod-openapi";
import { successSchema } from "@tern/core";
import { pauseSandbox } from "@tern/services";
import type { ApiDeps } from "../../deps.ts";
import { errorResponse, errorResponses, notFoundResponse } from "../records.ts";
import type { Router } from "../router.ts";
import { commandResponses, sandboxIdParam } from "./sandbox.ts";

const route = createRoute({
  method: "post",
  path: "/api/v1/sandboxes/{id}/pause",
  tags: ["Sandboxes"],
  summary: "Freeze the sandbox; its agent run waits",
  description:
    "Every process of the sandbox stops where it is. A run of its conversation neither fails nor goes on: " +
    "it waits, and POST /resume continues the same run. Answered once the sandbox is paused " +
    "(status PAUSED; the conversation's sandbox_status too). Pausing a paused sandbox changes nothing.",
  request: { params: sandboxIdParam },
  responses: {
    200: { description: "Paused", content: { "application/json": { schema: successSchema } } },
    ...errorResponses,
    ...notFoundResponse,
    ...commandResponses,
    410: errorResponse("The sandbox was removed"),
  },
});

export const registerPauseSandbox = (router: Router, deps: ApiDeps) =>
  router.openapi(route, async (c) => {
    await pauseSandbox(deps, c.get("principal"), c.req.valid("param").id);
    return c.json({ success: true }, 200);
  });
