import { createRoute } from "@hono/zod-openapi";
import { successSchema } from "@tern/core";
import { resumeSandbox } from "@tern/services";
import type { ApiDeps } from "../../deps.ts";
import { errorResponse, errorResponses, notFoundResponse } from "../records.ts";
import type { Router } from "../router.ts";
import { commandResponses, sandboxIdParam } from "./sandbox.ts";

const route = createRoute({
  method: "post",
  path: "/api/v1/sandboxes/{id}/resume",
  tags: ["Sandboxes"],
  summary: "Thaw a paused sandbox; the run that waited continues",
  description:
    "Answered once the sandbox runs again (status RUNNING). A run that waited for it continues where it " +
    "stopped: the same run, not a new one. Resuming a running sandbox changes nothing.",
  request: { params: sandboxIdParam },
  responses: {
    200: { description: "Running", content: { "application/json": { schema: successSchema } } },
    ...errorResponses,
    ...notFoundResponse,
    ...commandResponses,
    410: errorResponse("The sandbox was removed"),
  },
});

export const registerResumeSandbox = (router: Router, deps: ApiDeps) =>
  router.openapi(route, async (c) => {
    await resumeSandbox(deps, c.get("principal"), c.req.valid("param").id);
    return c.json({ success: true }, 200);
  });
