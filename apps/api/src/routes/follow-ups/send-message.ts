import { createRoute, z } from "@hono/zod-openapi";
import { AppError } from "@tern/core";
import { eventsRepository } from "@tern/db";
import { enqueueAgentRun } from "@tern/queue";
import type { ApiDeps } from "../../deps.ts";
import { errorResponses, errorSchema, notFoundResponse, textContentSchema } from "../records.ts";
import type { Router } from "../router.ts";
import {
  conflictResponse,
  conversationIdParam,
  enqueueOr503,
  ownedConversation,
  queueUnavailable,
  sandboxGone,
  successSchema,
} from "./conversation.ts";

/** OpenHands' SendMessageRequest. */
const sendMessageBody = z
  .object({
    role: z.literal("user").default("user"),
    content: z.array(textContentSchema).min(1).max(100),
    run: z.boolean().default(false).openapi({ description: "Start a run of the agent if none is going on" }),
  })
  .openapi("SendMessageRequest");

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
    body: { required: true, content: { "application/json": { schema: sendMessageBody } } },
  },
  responses: {
    200: { description: "Stored (and the run requested)", content: { "application/json": { schema: successSchema } } },
    ...errorResponses,
    ...notFoundResponse,
    ...conflictResponse("`run` asked, but the conversation's sandbox was removed"),
    503: {
      description: "The job queue is unreachable: nothing stored, or (said in the message) stored without a run",
      content: { "application/json": { schema: errorSchema } },
    },
  },
});

export const registerSendMessage = (router: Router, deps: ApiDeps) =>
  router.openapi(route, async (c) => {
    const conversation = await ownedConversation(deps, c.get("principal"), c.req.valid("param").conversation_id);
    const body = c.req.valid("json");
    if (body.run && sandboxGone(conversation)) {
      throw new AppError("conflict", "The conversation's sandbox was removed; the agent cannot run any more");
    }
    const message = {
      kind: "MessageEvent" as const,
      source: "user" as const,
      payload: { llm_message: { role: "user", content: body.content } },
    };
    // Fail fast, before storing anything, while the queue is unreachable.
    if (body.run && deps.redis.status !== "ready") throw queueUnavailable();
    // The message is committed before the run is asked for, so the run always sees it.
    await eventsRepository(deps.db).append(conversation.id, [message]);
    if (body.run) {
      await enqueueOr503(deps, () => enqueueAgentRun(deps.queues, conversation.id)).catch(() => {
        throw new AppError(
          "service_unavailable",
          "The message was stored, but the run could not be requested (job queue unreachable); POST /run to start it",
        );
      });
    }
    return c.json({ success: true }, 200);
  });
