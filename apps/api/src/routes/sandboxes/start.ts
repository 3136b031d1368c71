import { createRoute, z } from "@hono/zod-openapi";
import { sandboxRecordSchema } from "@tern/core";
import { startSandbox } from "@tern/services";
import type { ApiDeps } from "../../deps.ts";
import { errorResponse, errorResponses, toSandboxRecord } from "../records.ts";
import type { Router } from "../router.ts";

const route = createRoute({
  method: "post",
  path: "/api/v1/sandboxes",
  tags: ["Sandboxes"],
  summary: "Start a sandbox without a conversation (OpenHands' start_sandbox)",
  description:
    "Answered at once with the sandbox STARTING; a worker makes it (a warm one when it has one) and it turns RUNNING, " +
    "with its own `session_api_key` and its agent server in `exposed_urls` (AGENT_SERVER). Poll GET /api/v1/sandboxes?id=. " +
    "It counts against MAX_SANDBOXES_PER_USER and MAX_STARTS_IN_FLIGHT_PER_USER, and is removed by DELETE, " +
    "for idleness or for age like every sandbox.",
  request: {
    query: z.object({
      sandbox_spec_id: z.string().optional().openapi({
        description: "An id of GET /api/v1/sandbox-specs; absent: the default spec (SANDBOX_IMAGE)",
      }),
    }),
  },
  responses: {
    200: { description: "Starting", content: { "application/json": { schema: sandboxRecordSchema } } },
    ...errorResponses,
    503: errorResponse("The job queue is unreachable"),
  },
});

export const registerStartSandbox = (router: Router, deps: ApiDeps) =>
  router.openapi(route, async (c) => {
    const sandbox = await startSandbox(deps, c.get("principal").userId, c.req.valid("query").sandbox_spec_id ?? null);
    return c.json(toSandboxRecord(sandbox, deps.secretBox, deps.config), 200);
  });
