import { createRoute, z } from "@hono/zod-openapi";
import { pendingMessageRequestSchema, pendingMessageResponseSchema } from "@tern/core";
import { MAX_PENDING_MESSAGES, queuePendingMessage } from "@tern/services";
import type { ApiDeps } from "../../deps.ts";
import { errorResponse, errorResponses, notFoundResponse } from "../records.ts";
import { newRouter, type Router } from "../router.ts";

const route = createRoute({
  method: "post",
  path: "/api/v1/conversations/{conversation_id}/pending-messages",
  tags: ["Conversations"],
  summary: "Queue a message for a conversation that is still starting",
  description:
    "`conversation_id` is `task-{start task id}` (before READY, when there is no conversation id yet) or a " +
    `conversation id. Before READY the message waits, at most ${MAX_PENDING_MESSAGES} per task (then 429); ` +
    "at READY the queue is delivered in order and the agent runs on it. A task already READY, or a " +
    "conversation id, gets the message at once, with a run.",
  request: {
    params: z.object({
      conversation_id: z
        .string()
        .max(200)
        .openapi({
          param: { name: "conversation_id", in: "path" },
          example: "task-0f8fad5bd9cb469fa16570867728950e",
        }),
    }),
    body: { required: true, content: { "application/json": { schema: pendingMessageRequestSchema } } },
  },
  responses: {
    201: {
      description: "Queued (or delivered at once)",
      content: { "application/json": { schema: pendingMessageResponseSchema } },
    },
    ...errorResponses,
    ...notFoundResponse,
    409: errorResponse("The start task failed; or, delivered at once, the conversation cannot take it"),
    413: errorResponse("The message is longer than MAX_MESSAGE_BYTES"),
  },
});

const registerQueuePendingMessage = (router: Router, deps: ApiDeps) =>
  router.openapi(route, async (c) => {
    const result = await queuePendingMessage(
      deps,
      c.get("principal"),
      c.req.valid("param").conversation_id,
      c.req.valid("json").content,
    );
    return c.json(result, 201);
  });

/** /api/v1/conversations/{id}/pending-messages (OpenHands' pending messages). */
export const pendingMessageRoutes = (deps: ApiDeps) => {
  const router = newRouter();
  registerQueuePendingMessage(router, deps);
  return router;
};
