import { createRoute } from "@hono/zod-openapi";
import { skillsResponseSchema, skillType } from "@tern/core";
import { ownedConversation } from "@tern/services";
import type { ApiDeps } from "../../deps.ts";
import { conversationIdParam } from "../follow-ups/conversation.ts";
import { errorResponses, notFoundResponse } from "../records.ts";
import type { Router } from "../router.ts";

const route = createRoute({
  method: "get",
  path: "/api/v1/app-conversations/{conversation_id}/skills",
  tags: ["Conversations"],
  summary: "The skills the repository brought (SETTING_UP_SKILLS)",
  description:
    "As loaded at the start: a skill without triggers (`repo`) is always in the agent's system prompt; one " +
    "with triggers (`knowledge`) is loaded when a user message says one of them.",
  request: { params: conversationIdParam },
  responses: {
    200: { description: "The skills", content: { "application/json": { schema: skillsResponseSchema } } },
    ...errorResponses,
    ...notFoundResponse,
  },
});

export const registerListSkills = (router: Router, deps: ApiDeps) =>
  router.openapi(route, async (c) => {
    const conversation = await ownedConversation(deps, c.get("principal"), c.req.valid("param").conversation_id);
    return c.json(
      {
        skills: conversation.skills.map((s) => ({
          name: s.name,
          type: skillType(s),
          content: s.content,
          triggers: s.triggers,
        })),
      },
      200,
    );
  });
