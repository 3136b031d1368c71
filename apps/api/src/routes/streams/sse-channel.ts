import type { ApiConfig } from "../../config.ts";
import type { StreamHub } from "./event-pump.ts";

const encoder = new TextEncoder();

/**
 * An event's frame, encoded once for every stream that sends it: streams at the same place share
 * the catch-up read, hence the same event objects, so 200 watchers cost one serialisation.
 */
const frames = new WeakMap<object, Uint8Array>();
export const sharedFrame = (key: object, build: () => string): Uint8Array => {
  let frame = frames.get(key);
  if (!frame) {
    frame = encoder.encode(build());
    frames.set(key, frame);
  }
  return frame;
};

/** One SSE frame; `data` is JSON (one line: JSON.stringify escapes newlines). */
export const sseFrame = (f: { id?: string; event?: string; data: unknown }): string =>
  `${f.id !== undefined ? `id: ${f.id}\n` : ""}${f.event ? `event: ${f.event}\n` : ""}data: ${JSON.stringify(f.data)}\n\n`;

export interface SseChannel {
  body: ReadableStream<Uint8Array>;
  send(frame: string | Uint8Array): void;
  hasRoom(): boolean;
  /** Ends the stream cleanly (its last frames are still sent). */
  close(): void;
  /** Cuts the connection at once (a slow client): it drops what is queued and resumes from its last id. */
  abort(): void;
}

/**
 * The body of one SSE response: a byte stream bounded by STREAM_BUFFER_BYTES (the Node adapter
 * writes it to the socket as the socket drains), a heartbeat comment every STREAM_HEARTBEAT_MS,
 * a `retry` hint, and closed with every other stream of the process at shutdown (an `event:
 * shutdown` frame first, so a client knows to resume elsewhere rather than to stop).
 */
/** The Node response under a Hono context (@hono/node-server's bindings), to cut a connection. */
export const cutConnection = (env: unknown) => () =>
  (env as { outgoing?: { destroy: () => void } } | undefined)?.outgoing?.destroy();

export const openSseChannel = (
  config: Pick<ApiConfig, "STREAM_HEARTBEAT_MS" | "STREAM_BUFFER_BYTES">,
  hub: StreamHub,
  handlers: { onPull: () => void; onEnd: () => void; cut: () => void },
): SseChannel => {
  let controller: ReadableStreamDefaultController<Uint8Array> | undefined;
  let ended = false;
  const end = () => {
    if (ended) return false;
    ended = true;
    clearInterval(heartbeat);
    untrack();
    handlers.onEnd();
    return true;
  };
  const body = new ReadableStream<Uint8Array>(
    {
      start(c) {
        controller = c;
      },
      pull() {
        handlers.onPull();
      },
      cancel() {
        end();
      },
    },
    new ByteLengthQueuingStrategy({ highWaterMark: config.STREAM_BUFFER_BYTES }),
  );
  const channel: SseChannel = {
    body,
    send(frame) {
      if (!ended) controller?.enqueue(typeof frame === "string" ? encoder.encode(frame) : frame);
    },
    hasRoom: () => !ended && (controller?.desiredSize ?? 0) > 0,
    close() {
      if (end()) controller?.close();
    },
    abort() {
      // The adapter waits for the socket to drain before it reads the body again, so an error in
      // the body would not reach it: the connection is cut at the socket.
      if (end()) {
        handlers.cut();
        controller?.close();
      }
    },
  };
  const heartbeat = setInterval(() => {
    if (channel.hasRoom()) channel.send(": keepalive\n\n");
  }, config.STREAM_HEARTBEAT_MS);
  const untrack = hub.track(() => {
    channel.send(sseFrame({ event: "shutdown", data: { reason: "the server is stopping; resume from the last id" } }));
    channel.close();
  });
  channel.send("retry: 2000\n\n");
  return channel;
};
