import { createRoute, z } from "@hono/zod-openapi";
import { eventToJson, UnavailableError } from "@tern/core";
import { ownedConversation } from "@tern/services";
import type { ApiDeps } from "../../deps.ts";
import { conversationParam, eventFilterQuery, toEventQuery } from "../events/filter.ts";
import { errorResponse, errorResponses, notFoundResponse, sessionReadableSecurity } from "../records.ts";
import type { Router } from "../router.ts";
import { decodeEventCursor, encodeEventCursor } from "./event-cursor.ts";
import { createEventPump } from "./event-pump.ts";
import { cutConnection, openSseChannel, sharedFrame, sseFrame } from "./sse-channel.ts";

const route = createRoute({
  method: "get",
  path: "/api/v1/conversation/{conversation_id}/events/stream",
  tags: ["Events"],
  summary: "Stream a conversation's events (Server-Sent Events)",
  description:
    "Every stored event matching the filters, in (timestamp, sequence) order, then each new one as it is " +
    "appended. Each frame's `data` is the event as the search returns it, and its `id` is the event's keyset " +
    "cursor: reconnect with `Last-Event-ID` (or `?after=`) to resume with no gap and no duplicate, on any API " +
    "process. A `: keepalive` comment comes every STREAM_HEARTBEAT_MS; a client that stays behind a full " +
    "buffer for STREAM_SLOW_CLIENT_MS is disconnected (it resumes from its last id). At shutdown an " +
    "`event: shutdown` frame ends the stream.",
  request: {
    params: conversationParam,
    query: z.object({
      ...eventFilterQuery,
      after: z.string().optional().openapi({ description: "Resume after this event id (as Last-Event-ID)" }),
    }),
    headers: z.object({ "last-event-id": z.string().optional() }),
  },
  security: sessionReadableSecurity,
  responses: {
    200: { description: "An event stream", content: { "text/event-stream": { schema: z.string() } } },
    ...errorResponses,
    400: errorResponse("Last-Event-ID (or after) is not an id this conversation's stream sent"),
    ...notFoundResponse,
    503: errorResponse("Streams are not available on this process"),
  },
});

export const sseHeaders = {
  "content-type": "text/event-stream; charset=utf-8",
  "cache-control": "no-cache, no-transform",
  "x-accel-buffering": "no",
};

export const registerEventStream = (router: Router, deps: ApiDeps) =>
  router.openapi(route, async (c) => {
    const query = c.req.valid("query");
    const conversation = await ownedConversation(deps, c.get("principal"), c.req.valid("param").conversation_id);
    // Ownership first: another user's id is 404 whether or not this process streams.
    const hub = deps.streams;
    if (!hub || hub.closing) throw new UnavailableError("Event streams are not available on this process");
    const secret = deps.config.cursorSecret;
    const lastEventId = c.req.header("last-event-id");
    const after =
      lastEventId !== undefined && lastEventId.trim() !== ""
        ? decodeEventCursor(secret, conversation.id, lastEventId, "Last-Event-ID")
        : query.after
          ? decodeEventCursor(secret, conversation.id, query.after, "after")
          : null;
    const filter = { ...toEventQuery(query), conversationId: conversation.id };
    let pump: ReturnType<typeof createEventPump> | undefined;
    const channel = openSseChannel(deps.config, hub, {
      onPull: () => pump?.pull(),
      onEnd: () => pump?.stop(),
      cut: cutConnection(c.env),
    });
    pump = createEventPump(
      hub,
      filter,
      after,
      {
        write: (event, position) =>
          channel.send(
            sharedFrame(event, () =>
              sseFrame({ id: encodeEventCursor(secret, conversation.id, position), data: eventToJson(event) }),
            ),
          ),
        hasRoom: channel.hasRoom,
        onSlowClient: () => channel.abort(),
        onError: (err) => {
          deps.logger.warn({ err, conversation_id: conversation.id }, "event stream read failed");
          channel.abort();
        },
      },
      { slowClientMs: deps.config.STREAM_SLOW_CLIENT_MS },
    );
    pump.pull();
    return new Response(channel.body, { status: 200, headers: sseHeaders });
  });
