import { createRoute } from "@hono/zod-openapi";
import { startRequestSchema, startTaskRecordSchema } from "@tern/core";
import { startConversation } from "@tern/services";
import type { ApiDeps } from "../../deps.ts";
import { errorResponse, errorResponses, toStartTaskRecord } from "../records.ts";
import type { Router } from "../router.ts";

const route = createRoute({
  method: "post",
  path: "/api/v1/app-conversations",
  tags: ["Conversations"],
  summary: "Start a conversation; follow the returned start task until READY",
  description:
    "OpenHands' AppConversationStartRequest; unknown fields are ignored. The initial message always starts " +
    "the agent (as OpenHands does, whatever its `run`), with its text and images. `request` on the task " +
    "echoes the request as kept.",
  request: { body: { required: true, content: { "application/json": { schema: startRequestSchema } } } },
  responses: {
    200: { description: "The start task, WORKING", content: { "application/json": { schema: startTaskRecordSchema } } },
    ...errorResponses,
    404: errorResponse("parent_conversation_id is unknown or not the caller's"),
    409: errorResponse("conversation_id is taken"),
    413: errorResponse("The initial message's text is longer than MAX_MESSAGE_BYTES"),
    503: errorResponse("The job queue is unreachable; nothing was written"),
  },
});

export const registerStartConversation = (router: Router, deps: ApiDeps) =>
  router.openapi(route, async (c) => {
    const task = await startConversation(deps, c.get("principal").userId, c.req.valid("json"));
    return c.json(toStartTaskRecord(task, deps.config), 200);
  });
