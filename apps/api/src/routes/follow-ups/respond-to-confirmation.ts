import { createRoute, z } from "@hono/zod-openapi";
import { defaultRejectionReason, respondToConfirmation } from "@tern/services";
import type { ApiDeps } from "../../deps.ts";
import { errorResponse, errorResponses, notFoundResponse } from "../records.ts";
import type { Router } from "../router.ts";
import { conflictResponse, conversationIdParam, successSchema } from "./conversation.ts";

/** OpenHands' ConfirmationResponseRequest. */
const confirmationResponseSchema = z
  .object({
    accept: z.boolean(),
    reason: z.string().max(2000).default(defaultRejectionReason).openapi({
      description: "On reject: why, for the agent to read (each rejected call's UserRejectObservation)",
    }),
  })
  .openapi("ConfirmationResponseRequest");

const route = createRoute({
  method: "post",
  path: "/api/v1/conversation/{conversation_id}/events/respond_to_confirmation",
  tags: ["Follow-ups"],
  summary: "Accept or reject the tool calls that wait for confirmation",
  description:
    "The agent-server's route and body. Accept: the pending calls run, once, and the agent goes on. Reject: each " +
    "gets a UserRejectObservation carrying `reason`, and the agent goes on knowing it. Either way a new run is " +
    "requested. 409 when nothing waits (a second answer, or one after a reject). The conversation's session key " +
    "may call it.",
  request: {
    params: conversationIdParam,
    body: { required: true, content: { "application/json": { schema: confirmationResponseSchema } } },
  },
  responses: {
    200: { description: "Answered, and the run requested", content: { "application/json": { schema: successSchema } } },
    ...errorResponses,
    ...notFoundResponse,
    ...conflictResponse(
      "No tool calls wait for confirmation (never asked, or already answered); or accept, with the sandbox removed",
    ),
    503: errorResponse(
      "The job queue is unreachable: nothing answered, or (said in the message) answered without a run",
    ),
  },
});

export const registerRespondToConfirmation = (router: Router, deps: ApiDeps) =>
  router.openapi(route, async (c) => {
    const { accept, reason } = c.req.valid("json");
    await respondToConfirmation(deps, c.get("principal"), c.req.valid("param").conversation_id, { accept, reason });
    return c.json({ success: true }, 200);
  });
