import { createRoute } from "@hono/zod-openapi";
import { appSendMessageRequestSchema, appSendMessageResponseSchema } from "@tern/core";
import { sendAppMessage } from "@tern/services";
import type { ApiDeps } from "../../deps.ts";
import { conversationIdParam } from "../follow-ups/conversation.ts";
import { errorResponse, errorResponses, notFoundResponse } from "../records.ts";
import type { Router } from "../router.ts";

const route = createRoute({
  method: "post",
  path: "/api/v1/app-conversations/{conversation_id}/send-message",
  tags: ["Conversations"],
  summary: "Send the agent a message; it runs unless `run` is false",
  description:
    "OpenHands' route: `run` defaults to true (POST /api/v1/conversation/{id}/events, the agent server's " +
    "route, defaults it to false). A run in progress takes the message up at its next step. A sandbox " +
    "paused by its user is 409 (POST /api/v1/sandboxes/{id}/resume first); one paused by the janitor for " +
    "idleness is resumed by the run.",
  request: {
    params: conversationIdParam,
    body: { required: true, content: { "application/json": { schema: appSendMessageRequestSchema } } },
  },
  responses: {
    200: {
      description: "Stored (and the run requested)",
      content: { "application/json": { schema: appSendMessageResponseSchema } },
    },
    ...errorResponses,
    ...notFoundResponse,
    409: errorResponse(
      "The sandbox is paused (resume it first), or the conversation holds MAX_EVENTS_PER_CONVERSATION events",
    ),
    410: errorResponse("The sandbox was removed"),
    413: errorResponse("The message is longer than MAX_MESSAGE_BYTES"),
    503: errorResponse("The sandbox is in error, or the job queue is unreachable"),
  },
});

export const registerAppSendMessage = (router: Router, deps: ApiDeps) =>
  router.openapi(route, async (c) => {
    const { content, run } = c.req.valid("json");
    const result = await sendAppMessage(deps, c.get("principal"), c.req.valid("param").conversation_id, {
      content,
      run,
    });
    return c.json(result, 200);
  });
