import { createRoute } from "@hono/zod-openapi";
import { conversationRecordSchema, conversationUpdateRequestSchema } from "@tern/core";
import { updateConversation } from "@tern/services";
import type { ApiDeps } from "../../deps.ts";
import { conversationIdParam } from "../follow-ups/conversation.ts";
import { errorResponses, notFoundResponse, toConversationRecord } from "../records.ts";
import type { Router } from "../router.ts";

const route = createRoute({
  method: "patch",
  path: "/api/v1/app-conversations/{conversation_id}",
  tags: ["Conversations"],
  summary: "Change the conversation's title, visibility or repository fields",
  description:
    "Only the fields given change (OpenHands' AppConversationUpdateRequest). The repository must be " +
    "`owner/repo`; clearing it (null) needs selected_branch and git_provider cleared too. The repository " +
    "fields are the record's: the sandbox's workspace is not cloned again.",
  request: {
    params: conversationIdParam,
    body: { required: true, content: { "application/json": { schema: conversationUpdateRequestSchema } } },
  },
  responses: {
    200: {
      description: "The conversation, changed",
      content: { "application/json": { schema: conversationRecordSchema } },
    },
    ...errorResponses,
    ...notFoundResponse,
  },
});

export const registerUpdateConversation = (router: Router, deps: ApiDeps) =>
  router.openapi(route, async (c) => {
    const conversation = await updateConversation(
      deps,
      c.get("principal"),
      c.req.valid("param").conversation_id,
      c.req.valid("json"),
    );
    return c.json(toConversationRecord(conversation, deps.config, deps.secretBox), 200);
  });
