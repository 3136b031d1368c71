import { Readable } from "node:stream";
import { createRoute, z } from "@hono/zod-openapi";
import { toHexId } from "@tern/core";
import { ownedConversation, trajectoryZip } from "@tern/services";
import type { ApiDeps } from "../../deps.ts";
import { conversationIdParam } from "../follow-ups/conversation.ts";
import { errorResponses, notFoundResponse, toConversationRecord } from "../records.ts";
import type { Router } from "../router.ts";

const route = createRoute({
  method: "get",
  path: "/api/v1/app-conversations/{conversation_id}/download",
  tags: ["Conversations"],
  summary: "The conversation's trajectory as a zip",
  description:
    "`meta.json` (the conversation record) and every event as JSON, `event_{i:06d}_{id}.json` in " +
    "(timestamp, sequence) order, as OpenHands names them. Streamed as it is read, a page of events at a " +
    "time. A start task's id is 404: only a conversation has a trajectory.",
  request: { params: conversationIdParam },
  responses: {
    200: {
      description: "A zip archive",
      content: { "application/zip": { schema: z.string().openapi({ type: "string", format: "binary" }) } },
    },
    ...errorResponses,
    ...notFoundResponse,
  },
});

export const registerDownloadTrajectory = (router: Router, deps: ApiDeps) =>
  router.openapi(route, async (c) => {
    const conversation = await ownedConversation(deps, c.get("principal"), c.req.valid("param").conversation_id);
    const zip = Readable.from(
      trajectoryZip(deps, conversation.id, toConversationRecord(conversation, deps.config, deps.secretBox)),
    );
    c.header("content-type", "application/zip");
    c.header("content-disposition", `attachment; filename="conversation-${toHexId(conversation.id)}.zip"`);
    return c.body(Readable.toWeb(zip) as ReadableStream<Uint8Array>, 200);
  });
