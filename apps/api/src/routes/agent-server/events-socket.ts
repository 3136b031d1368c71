import { randomUUID } from "node:crypto";
import { upgradeWebSocket } from "@hono/node-server";
import { newId, UnavailableError } from "@tern/core";
import type { EventPosition } from "@tern/services";
import { conversationInfos, ownedConversation, sendMessage } from "@tern/services";
import type { Hono } from "hono";
import { z } from "zod";
import type { ApiDeps } from "../../deps.ts";
import type { KeyUsage } from "../../middleware/key-usage.ts";
import { type RateLimiter, rateKeyOf } from "../../middleware/rate-limit.ts";
import { type EventFeed, type FeedSocket, openEventFeed } from "../streams/events-socket.ts";
import { frameFailure, refusalOfFrame } from "../streams/socket-frames.ts";
import { type AgentCaller, authenticateAgentKey } from "./auth.ts";
import type { AgentServerEnv } from "./context.ts";

/** How long a socket opened without a key has to send its auth frame (as OpenHands' sockets.py). */
const FIRST_FRAME_AUTH_TIMEOUT_MS = 10_000;

/** What a client sends once authenticated: the SDK's Message, of which we take the user's text. */
const incomingMessage = z.object({
  role: z.literal("user"),
  content: z.array(z.object({ type: z.literal("text"), text: z.string().min(1) }).passthrough()).min(1),
});

/** The agent server's ServerErrorEvent, sent on the socket when a client frame could not be acted on. */
const serverError = (code: string, detail: string) =>
  JSON.stringify({
    kind: "ServerErrorEvent",
    id: randomUUID(),
    timestamp: new Date().toISOString(),
    source: "environment",
    code,
    detail,
  });

const isAuthFrame = (data: unknown): boolean =>
  typeof data === "object" && data !== null && (data as { type?: unknown }).type === "auth";

/**
 * after_timestamp as an instant: a naive one is the server's time, which is UTC here. Kept as given
 * (Postgres reads it), so its microseconds count as the stored timestamps' do; null when not a datetime.
 */
const parseAfterTimestamp = (raw: string): string | null => {
  const naive = !/(Z|[+-]\d\d:?\d\d)$/i.test(raw);
  const at = naive ? `${raw}Z` : raw;
  return /^\d{4}-\d\d-\d\d[T ]\d\d:\d\d/.test(at) && !Number.isNaN(Date.parse(at)) ? at : null;
};

/**
 * `/agent/{sandbox}/sockets/events/{conversation_id}`: the agent server's event socket (sockets.py).
 * The key is the query's `session_api_key` or the X-Session-API-Key header (legacy), else the first
 * frame `{"type": "auth", "session_api_key": ...}` within 10 s; a bad one closes with 4001. A
 * conversation that is not in this sandbox (or not the caller's) closes with 4004. `resend_mode=all`
 * sends every stored event first, `since` those with a timestamp at or after `after_timestamp`,
 * none: only new ones. Each later frame is a user message, which runs the agent (the same service
 * as POST .../events), held to what that POST is (socket-frames.ts: 1 MiB, the messages budget per
 * frame, no NUL); an auth frame again is ignored. Its events are fed as the app server's socket
 * feeds them (openEventFeed).
 */
export const registerAgentEventSocket = (
  router: Hono<AgentServerEnv>,
  deps: ApiDeps,
  keyUsage: KeyUsage,
  limiter: RateLimiter | null,
) =>
  router.get(
    "/sockets/events/:conversation_id",
    upgradeWebSocket(async (c) => {
      const hub = deps.streams;
      if (!hub || hub.closing) throw new UnavailableError("Event streams are not available on this process");
      const rawSandboxId = c.req.param("sandbox_id") ?? "";
      const rawConversationId = c.req.param("conversation_id") ?? "";
      const legacyKey = c.req.query("session_api_key")?.trim() || c.req.header("x-session-api-key")?.trim() || null;
      const mode = c.req.query("resend_mode") ?? (c.req.query("resend_all") === "true" ? "all" : null);
      const afterRaw = c.req.query("after_timestamp")?.trim() || null;

      let state: "auth" | "authenticating" | "open" | "closed" = "auth";
      let socket: FeedSocket | undefined;
      let feed: EventFeed | undefined;
      let caller: AgentCaller | undefined;
      let conversationId = "";
      let authTimer: NodeJS.Timeout | undefined;
      const close = (code: number, reason: string) => {
        state = "closed";
        clearTimeout(authTimer);
        feed?.stop();
        socket?.close(code, reason);
      };

      const failed = (err: Error) => {
        deps.logger.warn({ err }, "agent-server socket failed to open");
        close(1011, "internal error");
      };
      const begin = async (ws: FeedSocket, key: string | null) => {
        clearTimeout(authTimer);
        try {
          caller = await authenticateAgentKey(deps, keyUsage, rawSandboxId, key);
        } catch {
          return close(4001, "Authentication failed");
        }
        if (limiter && (await limiter.check(rateKeyOf(caller.principal), null))?.refused) {
          return close(1013, "Rate limit exceeded");
        }
        const conversation = await ownedConversation(deps, { userId: caller.sandbox.userId }, rawConversationId).catch(
          () => null,
        );
        // A conversation's own key opens that conversation's socket only.
        const own = caller.sandbox.via === "conversation_key" ? caller.sandbox.conversationId : null;
        if (!conversation || conversation.sandboxId !== caller.sandbox.sandboxId || (own && own !== conversation.id)) {
          return close(4004, "Conversation not found");
        }
        conversationId = conversation.id;
        if (mode !== null && mode !== "all" && mode !== "since") return close(1008, "resend_mode must be all or since");
        let after: EventPosition | null = null;
        let fromStart = mode === "all";
        if (mode === "since" && afterRaw) {
          const at = parseAfterTimestamp(afterRaw);
          if (!at) return close(1008, "after_timestamp must be an ISO 8601 datetime");
          // Every event at or after the instant: positions are (timestamp, seq), and seq starts at 1.
          after = { timestamp: at, seq: -1 };
          fromStart = false;
        }
        if (state !== "authenticating") return;
        state = "open";
        // As the agent server does on every subscription, the conversation's whole state first: the
        // SDK's RemoteConversation counts the socket ready only once it has read it.
        const [info] = await conversationInfos(deps, [conversation]);
        ws.send(
          JSON.stringify({
            kind: "ConversationStateUpdateEvent",
            id: newId(),
            source: "environment",
            timestamp: new Date().toISOString(),
            key: "full_state",
            value: info,
          }),
        );
        feed = await openEventFeed(deps, hub, ws, { conversationId, after, fromStart });
        if (state !== "open") feed.stop();
      };

      return {
        async onOpen(_e, ws) {
          socket = ws;
          if (legacyKey) {
            state = "authenticating";
            return begin(ws, legacyKey).catch(failed);
          }
          authTimer = setTimeout(() => close(4001, "Authentication failed"), FIRST_FRAME_AUTH_TIMEOUT_MS);
        },
        async onMessage(e, ws) {
          const text = String(e.data);
          let data: unknown;
          try {
            data = JSON.parse(text);
          } catch {
            data = undefined;
          }
          if (state === "auth") {
            // The first frame must be the auth frame; anything else fails authentication.
            const key = isAuthFrame(data) ? (data as { session_api_key?: unknown }).session_api_key : undefined;
            state = "authenticating";
            return begin(ws, typeof key === "string" ? key : null).catch(failed);
          }
          if (state !== "open" || !caller || isAuthFrame(data)) return;
          const refusal = await refusalOfFrame(limiter, caller.principal, text);
          if (refusal) return void ws.send(serverError(refusal.code, refusal.detail));
          const parsed = incomingMessage.safeParse(data);
          if (!parsed.success) {
            ws.send(serverError("ValidationError", "Send a Message: {role: 'user', content: [{type: 'text', text}]}"));
            return;
          }
          const content = parsed.data.content.map((p) => ({ type: p.type, text: p.text }));
          // The conversation was checked to be in the caller's sandbox: it is the caller's to message.
          const asCaller = { userId: caller.sandbox.userId, conversationId };
          await sendMessage(deps, asCaller, conversationId, { content, run: true }).catch((err: unknown) => {
            const failure = frameFailure(err, deps.logger, { conversation_id: conversationId });
            ws.send(serverError(failure.code, failure.detail));
          });
        },
        onClose: () => close(1000, ""),
        onError: () => close(1011, ""),
      };
    }),
  );
