import { createRoute, z } from "@hono/zod-openapi";
import { ownedConversation, readOnlyKeyOf } from "@tern/services";
import type { ApiDeps } from "../../deps.ts";
import { conversationIdParam } from "../follow-ups/conversation.ts";
import { errorResponses, notFoundResponse } from "../records.ts";
import type { Router } from "../router.ts";

const readOnlyKeySchema = z
  .object({
    key: z.string().meta({ description: "Reads this conversation and its events; does nothing else" }),
  })
  .meta({ id: "ReadOnlyKey" });

const route = createRoute({
  method: "post",
  path: "/api/v1/app-conversations/{conversation_id}/read-only-key",
  tags: ["Conversations"],
  summary: "A key that only watches the conversation (for sharing it)",
  description:
    "The conversation's read-only key: as `X-Session-API-Key`, or pasted into the conversation page, it reads " +
    "the conversation, its events and their streams, and does nothing else (no message, no command, no " +
    "agent-server route, no secret). The same key each time it is asked; it stops working when the " +
    "conversation is deleted. Unlike `session_api_key`, which is the conversation's agent-server key, it " +
    "is the one to share with someone who should only watch.",
  request: { params: conversationIdParam },
  responses: {
    200: { description: "The key", content: { "application/json": { schema: readOnlyKeySchema } } },
    ...errorResponses,
    ...notFoundResponse,
  },
});

export const registerReadOnlyKey = (router: Router, deps: ApiDeps) =>
  router.openapi(route, async (c) => {
    const conversation = await ownedConversation(deps, c.get("principal"), c.req.valid("param").conversation_id);
    return c.json({ key: await readOnlyKeyOf(deps, conversation.id) }, 200);
  });
