import { createRoute } from "@hono/zod-openapi";
import { AppError } from "@tern/core";
import { agentRunsRepository } from "@tern/db";
import { enqueueAgentRun, isAgentRunJobAlive } from "@tern/queue";
import type { ApiDeps } from "../../deps.ts";
import { errorResponses, notFoundResponse } from "../records.ts";
import type { Router } from "../router.ts";
import {
  conflictResponse,
  conversationIdParam,
  enqueueFailedResponse,
  enqueueOr503,
  ownedConversation,
  sandboxGone,
  successSchema,
} from "./conversation.ts";

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
    ...enqueueFailedResponse,
  },
});

export const registerRun = (router: Router, deps: ApiDeps) =>
  router.openapi(route, async (c) => {
    const conversation = await ownedConversation(deps, c.get("principal"), c.req.valid("param").conversation_id);
    if (sandboxGone(conversation)) {
      throw new AppError("conflict", "The conversation's sandbox was removed; the agent cannot run any more");
    }
    // As OpenHands answers: 409 while running. (The worker's run lock is what guarantees one run;
    // a lock whose job is gone is stale, and the worker ends it when the new run comes.)
    const active = await agentRunsRepository(deps.db).activeRun(conversation.id);
    if (active && (await enqueueOr503(deps, () => isAgentRunJobAlive(deps.queues, conversation.id, active)))) {
      throw new AppError("conflict", "The agent is already running in this conversation");
    }
    await enqueueOr503(deps, () => enqueueAgentRun(deps.queues, conversation.id));
    return c.json({ success: true }, 200);
  });
