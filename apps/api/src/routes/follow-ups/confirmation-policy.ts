import { createRoute, z } from "@hono/zod-openapi";
import { type ConfirmationPolicy, confirmationPolicySchema } from "@tern/core";
import { setConfirmationPolicy } from "@tern/services";
import type { ApiDeps } from "../../deps.ts";
import { errorResponses, notFoundResponse } from "../records.ts";
import type { Router } from "../router.ts";
import { conversationIdParam, successSchema } from "./conversation.ts";

/** OpenHands' SetConfirmationPolicyRequest. */
const setConfirmationPolicySchema = z
  .object({ policy: confirmationPolicySchema as unknown as z.ZodType<ConfirmationPolicy> })
  .openapi("SetConfirmationPolicyRequest");

const routeAt = (path: string) =>
  createRoute({
    method: "post",
    path,
    tags: ["Follow-ups"],
    summary: "Set the conversation's own confirmation policy",
    description:
      "Overrides the user's settings (confirmation_mode, security_analyzer) for this conversation, from its next " +
      "LLM response on: NeverConfirm, AlwaysConfirm, or ConfirmRisky with a threshold (LOW, MEDIUM, HIGH; default " +
      "HIGH) and confirm_unknown (default true).",
    request: {
      params: conversationIdParam,
      body: { required: true, content: { "application/json": { schema: setConfirmationPolicySchema } } },
    },
    responses: {
      200: { description: "Set", content: { "application/json": { schema: successSchema } } },
      ...errorResponses,
      ...notFoundResponse,
    },
  });

/** tern's path (kebab-case, as its other routes), and the agent-server's own (`confirmation_policy`) for its clients. */
export const registerConfirmationPolicy = (router: Router, deps: ApiDeps) => {
  for (const route of [
    routeAt("/api/v1/conversation/{conversation_id}/confirmation-policy"),
    routeAt("/api/v1/conversation/{conversation_id}/confirmation_policy"),
  ]) {
    router.openapi(route, async (c) => {
      await setConfirmationPolicy(
        deps,
        c.get("principal"),
        c.req.valid("param").conversation_id,
        c.req.valid("json").policy,
      );
      return c.json({ success: true }, 200);
    });
  }
};
