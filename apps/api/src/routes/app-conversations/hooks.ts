import { createRoute } from "@hono/zod-openapi";
import { hooksResponseSchema } from "@tern/core";
import { ownedConversation } from "@tern/services";
import type { ApiDeps } from "../../deps.ts";
import { conversationIdParam } from "../follow-ups/conversation.ts";
import { errorResponses, notFoundResponse } from "../records.ts";
import type { Router } from "../router.ts";

const route = createRoute({
  method: "get",
  path: "/api/v1/app-conversations/{conversation_id}/hooks",
  tags: ["Conversations"],
  summary: "The hooks the repository brought (SETTING_UP_GIT_HOOKS)",
  description:
    "In OpenHands' hook shape. `pre-commit`: git's pre-commit hook, installed from the repository's " +
    ".openhands/pre-commit.sh (a hook the repository had already runs first).",
  request: { params: conversationIdParam },
  responses: {
    200: { description: "The hooks", content: { "application/json": { schema: hooksResponseSchema } } },
    ...errorResponses,
    ...notFoundResponse,
  },
});

export const registerListHooks = (router: Router, deps: ApiDeps) =>
  router.openapi(route, async (c) => {
    const conversation = await ownedConversation(deps, c.get("principal"), c.req.valid("param").conversation_id);
    return c.json({ hooks: conversation.hooks }, 200);
  });
