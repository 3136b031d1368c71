import { upgradeWebSocket } from "@hono/node-server";
import { BadRequestError, eventToJson, parseId, UnavailableError } from "@tern/core";
import {
  type EventPosition,
  eventPositionOf,
  latestEventPosition,
  ownedConversation,
  sendMessage,
} from "@tern/services";
import type { Hono } from "hono";
import { z } from "zod";
import type { ApiDeps } from "../../deps.ts";
import type { AuthEnv } from "../../middleware/auth.ts";
import type { RateLimiter } from "../../middleware/rate-limit.ts";
import { decodeEventCursor } from "./event-cursor.ts";
import { createEventPump, type StreamHub } from "./event-pump.ts";
import { frameFailure, refusalOfFrame } from "./socket-frames.ts";

/** What a socket client may send: a user message, as OpenHands' agent-server socket takes it. */
const incomingMessage = z.object({
  role: z.literal("user").default("user"),
  content: z.array(z.object({ type: z.literal("text"), text: z.string().min(1) })).min(1),
  run: z.boolean().default(true),
});

/** The position of an event of the conversation named by its id (what a socket client saw last). */
const positionOfEvent = async (deps: ApiDeps, conversationId: string, eventId: string): Promise<EventPosition> => {
  const position = await eventPositionOf(deps, conversationId, eventId);
  if (!position) throw new BadRequestError("after: no event of this conversation has that id");
  return position;
};

/**
 * `/sockets/events/{conversation_id}`: the conversation's events over a WebSocket, for clients of
 * OpenHands' agent-server socket. Each message is one event's JSON. `resend_all=true` sends every
 * stored event first (else only new ones); `after=<event id or stream id>` resumes after that event
 * with no gap and no duplicate. A client may send a user message ({role, content, run}), held to
 * what a POST of it is (socket-frames.ts: 1 MiB, the messages budget per frame, no NUL). Same
 * bounded buffer, heartbeat (pings) and shutdown as the SSE stream; close code 1013 tells a slow
 * client to resume with `after`.
 */
export const registerEventSocket = (app: Hono<AuthEnv>, deps: ApiDeps, limiter: RateLimiter | null) =>
  app.get(
    "/sockets/events/:conversation_id",
    upgradeWebSocket(async (c) => {
      const hub = deps.streams;
      if (!hub || hub.closing) throw new UnavailableError("Event streams are not available on this process");
      const principal = c.get("principal");
      const conversation = await ownedConversation(deps, principal, c.req.param("conversation_id") ?? "");
      const secret = deps.config.cursorSecret;
      const afterRaw = c.req.query("after")?.trim();
      const afterId = afterRaw ? parseId(afterRaw) : null;
      const resendAll = c.req.query("resend_all") === "true";
      const after = afterRaw
        ? afterId
          ? await positionOfEvent(deps, conversation.id, afterId)
          : decodeEventCursor(secret, conversation.id, afterRaw, "after")
        : null;

      let feed: EventFeed | undefined;
      let socket: FeedSocket | undefined;
      const stop = () => feed?.stop();
      return {
        async onOpen(_e, ws) {
          socket = ws;
          feed = await openEventFeed(deps, hub, ws, { conversationId: conversation.id, after, fromStart: resendAll });
        },
        async onMessage(e) {
          const reply = (r: { code: string; detail: string }) => socket?.send(JSON.stringify({ kind: "error", ...r }));
          if (principal.kind !== "api_key") {
            reply({ code: "forbidden", detail: "A session key only reads this conversation" });
            return;
          }
          const text = String(e.data);
          const refusal = await refusalOfFrame(limiter, principal, text);
          if (refusal) return void reply(refusal);
          let parsed: z.infer<typeof incomingMessage>;
          try {
            parsed = incomingMessage.parse(JSON.parse(text));
          } catch {
            reply({ code: "validation_failed", detail: "Send {role: 'user', content: [{type: 'text', text}]}" });
            return;
          }
          await sendMessage(deps, principal, conversation.id, { content: parsed.content, run: parsed.run }).catch(
            (err: unknown) => reply(frameFailure(err, deps.logger, { conversation_id: conversation.id })),
          );
        },
        onClose: stop,
        onError: stop,
      };
    }),
  );

/** What an event feed writes to: a WebSocket as @hono/node-server hands it over. */
export interface FeedSocket {
  send: (d: string) => void;
  close: (code?: number, reason?: string) => void;
  raw?: unknown;
}

export interface EventFeed {
  stop: () => void;
}

/**
 * Sends a conversation's events to an open socket, each one's JSON: every stored event after
 * `after` (or all of them with `fromStart`, else only new ones), then each new one. Bounded buffer,
 * heartbeat (pings) and shutdown as the SSE stream; close code 1013 tells a slow client to resume.
 * Shared by the app server's socket and the agent server's (routes/agent-server/events-socket.ts).
 */
export const openEventFeed = async (
  deps: ApiDeps,
  hub: StreamHub,
  ws: FeedSocket,
  opts: { conversationId: string; after: EventPosition | null; fromStart: boolean },
): Promise<EventFeed> => {
  const raw = ws.raw as { bufferedAmount: number; ping?: () => void } | undefined;
  let timers: NodeJS.Timeout[] = [];
  let pump: ReturnType<typeof createEventPump> | undefined;
  let untrack: () => unknown = () => undefined;
  const stop = () => {
    for (const t of timers) clearInterval(t);
    timers = [];
    untrack();
    pump?.stop();
  };
  const buffer = deps.config.STREAM_BUFFER_BYTES;
  const hasRoom = () => (raw?.bufferedAmount ?? 0) < buffer;
  untrack = hub.track(() => {
    stop();
    ws.close(1001, "the server is stopping; reconnect with after=<last event id>");
  });
  // Subscribed (inside createEventPump) before the latest position is read: nothing falls between.
  const created = createEventPump(
    hub,
    { conversationId: opts.conversationId },
    opts.after,
    {
      write: (event) => ws.send(JSON.stringify(eventToJson(event))),
      hasRoom,
      onSlowClient: () => {
        stop();
        ws.close(1013, "slow client: reconnect with after=<last event id>");
      },
      onError: (err) => {
        deps.logger.warn({ err, conversation_id: opts.conversationId }, "event socket read failed");
        stop();
        ws.close(1011, "read failed: reconnect with after=<last event id>");
      },
    },
    { slowClientMs: deps.config.STREAM_SLOW_CLIENT_MS },
  );
  pump = created;
  if (!opts.after && !opts.fromStart) created.seek(await latestEventPosition(deps, opts.conversationId));
  created.pull();
  // The socket has no drain event here: while the buffer is full, look again shortly (no database read).
  timers.push(setInterval(() => hasRoom() && created.pull(), 50));
  timers.push(setInterval(() => raw?.ping?.(), deps.config.STREAM_HEARTBEAT_MS));
  return { stop };
};
