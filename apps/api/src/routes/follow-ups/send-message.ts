import { createRoute } from "@hono/zod-openapi";
import { sendMessageRequestSchema } from "@tern/core";
import { sendMessage } from "@tern/services";
import type { ApiDeps } from "../../deps.ts";
import { errorResponse, errorResponses, notFoundResponse } from "../records.ts";
import type { Router } from "../router.ts";
import { conflictResponse, conversationIdParam, successSchema } from "./conversation.ts";

const route = createRoute({
  method: "post",
  path: "/api/v1/conversation/{conversation_id}/events",
  tags: ["Follow-ups"],
  summary: "Send the agent a message; with run, the agent answers it",
  description:
    "Appends a user MessageEvent. With `run: true` an agent run is requested: a run in progress " +
    "takes the message up at its next step, otherwise a new run starts (never two at once).",
  request: {
    params: conversationIdParam,
    body: { required: true, content: { "application/json": { schema: sendMessageRequestSchema } } },
  },
  responses: {
    200: { description: "Stored (and the run requested)", content: { "application/json": { schema: successSchema } } },
    ...errorResponses,
    ...notFoundResponse,
    ...conflictResponse(
      "`run` asked, but the conversation's sandbox was removed; or the conversation holds MAX_EVENTS_PER_CONVERSATION events",
    ),
    410: errorResponse(
      "`run` asked, but the conversation's sandbox was lost with its engine (no worker of it for ENGINE_LOST_AFTER); the conversation and its events are kept",
    ),
    413: errorResponse("The message's text is longer than MAX_MESSAGE_BYTES"),
    503: errorResponse("The job queue is unreachable: nothing stored, or (said in the message) stored without a run"),
  },
});

export const registerSendMessage = (router: Router, deps: ApiDeps) =>
  router.openapi(route, async (c) => {
    const { content, run } = c.req.valid("json");
    await sendMessage(deps, c.get("principal"), c.req.valid("param").conversation_id, { content, run });
    return c.json({ success: true }, 200);
  });
