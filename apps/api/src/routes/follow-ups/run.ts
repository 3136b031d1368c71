import { createRoute } from "@hono/zod-openapi";
import { runConversation } from "@tern/services";
import type { ApiDeps } from "../../deps.ts";
import { errorResponse, errorResponses, notFoundResponse } from "../records.ts";
import type { Router } from "../router.ts";
import { conflictResponse, conversationIdParam, enqueueFailedResponse, successSchema } from "./conversation.ts";

const route = createRoute({
  method: "post",
  path: "/api/v1/conversation/{conversation_id}/run",
  tags: ["Follow-ups"],
  summary: "Run the agent (e.g. after a pause, or on a message sent without run)",
  description: "Continues from the stored events. A run with nothing left to answer ends without a change.",
  request: { params: conversationIdParam },
  responses: {
    200: { description: "Run requested", content: { "application/json": { schema: successSchema } } },
    ...errorResponses,
    ...notFoundResponse,
    ...conflictResponse("A run is already going on, or the sandbox was removed"),
    410: errorResponse("The conversation's sandbox was lost with its engine (no worker of it for ENGINE_LOST_AFTER)"),
    ...enqueueFailedResponse,
  },
});

export const registerRun = (router: Router, deps: ApiDeps) =>
  router.openapi(route, async (c) => {
    await runConversation(deps, c.get("principal"), c.req.valid("param").conversation_id);
    return c.json({ success: true }, 200);
  });
