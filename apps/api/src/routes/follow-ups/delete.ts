import { createRoute } from "@hono/zod-openapi";
import { deleteConversation } from "@tern/services";
import type { ApiDeps } from "../../deps.ts";
import { errorResponses, notFoundResponse } from "../records.ts";
import type { Router } from "../router.ts";
import { conversationIdParam, enqueueFailedResponse, successSchema } from "./conversation.ts";

const route = createRoute({
  method: "delete",
  path: "/api/v1/app-conversations/{conversation_id}",
  tags: ["Conversations"],
  summary: "Stop and remove the conversation's sandbox; its record and events are kept",
  description:
    "A worker removes the container, then the conversation's sandbox_status is MISSING. " +
    "A run in progress ends in `error` at its next tool call.",
  request: { params: conversationIdParam },
  responses: {
    200: { description: "Removal requested", content: { "application/json": { schema: successSchema } } },
    ...errorResponses,
    ...notFoundResponse,
    ...enqueueFailedResponse,
  },
});

export const registerDeleteConversation = (router: Router, deps: ApiDeps) =>
  router.openapi(route, async (c) => {
    await deleteConversation(deps, c.get("principal"), c.req.valid("param").conversation_id);
    return c.json({ success: true }, 200);
  });
