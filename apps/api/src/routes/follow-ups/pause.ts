import { createRoute } from "@hono/zod-openapi";
import { pauseConversation } from "@tern/services";
import type { ApiDeps } from "../../deps.ts";
import { errorResponses, notFoundResponse } from "../records.ts";
import type { Router } from "../router.ts";
import { conversationIdParam, successSchema } from "./conversation.ts";
import { runStopsOf } from "./interrupt.ts";

const route = createRoute({
  method: "post",
  path: "/api/v1/conversation/{conversation_id}/pause",
  tags: ["Follow-ups"],
  summary: "Pause the agent",
  description:
    "Stores a PauseEvent. A run in progress stops between two steps (execution_status `paused`); one still " +
    "starting the user's MCP servers stops starting them at once; " +
    "with none in progress the conversation is `paused` at once. POST /run continues it.",
  request: { params: conversationIdParam },
  responses: {
    200: { description: "Pause requested", content: { "application/json": { schema: successSchema } } },
    ...errorResponses,
    ...notFoundResponse,
  },
});

export const registerPause = (router: Router, deps: ApiDeps) =>
  router.openapi(route, async (c) => {
    await pauseConversation(
      { ...deps, publish: runStopsOf(deps) },
      c.get("principal"),
      c.req.valid("param").conversation_id,
    );
    return c.json({ success: true }, 200);
  });
