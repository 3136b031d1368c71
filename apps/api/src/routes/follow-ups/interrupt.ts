import { createRoute } from "@hono/zod-openapi";
import { publishRunInterrupt } from "@tern/queue";
import { interruptConversation, type PublishRunStop } from "@tern/services";
import type { ApiDeps } from "../../deps.ts";
import { errorResponses, notFoundResponse } from "../records.ts";
import type { Router } from "../router.ts";
import { conversationIdParam, successSchema } from "./conversation.ts";

const route = createRoute({
  method: "post",
  path: "/api/v1/conversation/{conversation_id}/interrupt",
  tags: ["Follow-ups"],
  summary: "Stop the agent now",
  description:
    "Stores an InterruptEvent and a PauseEvent, and stops a run in progress at once, not between steps: its LLM " +
    "call in flight is cancelled and its running command gets Ctrl-C. The conversation ends `paused`, with " +
    "nothing half-written; POST /run continues it. The conversation's session key may call it.",
  request: { params: conversationIdParam },
  responses: {
    200: { description: "Interrupted", content: { "application/json": { schema: successSchema } } },
    ...errorResponses,
    ...notFoundResponse,
  },
});

/** How the API tells the workers that a user interrupted or paused a run (run-interrupts in @tern/queue). */
export const runStopsOf =
  (deps: ApiDeps): PublishRunStop =>
  (id, kind) =>
    publishRunInterrupt(deps.redis, deps.config.REDIS_PREFIX, id, kind);

export const registerInterrupt = (router: Router, deps: ApiDeps) =>
  router.openapi(route, async (c) => {
    await interruptConversation(
      { ...deps, publish: runStopsOf(deps) },
      c.get("principal"),
      c.req.valid("param").conversation_id,
    );
    return c.json({ success: true }, 200);
  });
