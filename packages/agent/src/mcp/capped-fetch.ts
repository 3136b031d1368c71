import type { CheckedFetch } from "@tern/core";

/** A remote MCP server's answer grew past MCP_MAX_RESPONSE_BYTES: it is cut, nothing more is read. */
class McpResponseTooLargeError extends Error {
  override name = "McpResponseTooLargeError";
}

const LF = 10;
const CR = 13;

/**
 * Counts the bytes of one message of a body: the whole body, or, in an event stream (the SSE
 * transport's stream, a streamable HTTP answer sent as events), each event, from one blank line to
 * the next. A stream may carry messages for as long as the session lives; no one of them may pass `max`.
 */
const messageCounter = (eventStream: boolean, max: number) => {
  let size = 0;
  let lineStart = true;
  return (chunk: Uint8Array): boolean => {
    if (!eventStream) {
      size += chunk.byteLength;
      return size <= max;
    }
    for (const byte of chunk) {
      if (byte === LF) {
        // A line that ends where it starts is the blank line that ends an event.
        if (lineStart) size = 0;
        lineStart = true;
      } else if (byte !== CR) {
        lineStart = false;
        size++;
        if (size > max) return false;
      }
    }
    return true;
  };
};

/**
 * `fetch`, with every answer's body cut at `max` bytes a message: past it the body fails with
 * McpResponseTooLargeError, the connection is dropped and `onTooLarge` is told, so a server that
 * answers without end costs the worker no more than that.
 */
export const cappedFetch =
  (fetch: CheckedFetch, max: number, onTooLarge: (err: McpResponseTooLargeError) => void): CheckedFetch =>
  async (input, init) => {
    const res = await fetch(input, init);
    if (!res.body) return res;
    const eventStream = (res.headers.get("content-type") ?? "").toLowerCase().includes("text/event-stream");
    const fits = messageCounter(eventStream, max);
    const reader = res.body.getReader();
    const body = new ReadableStream<Uint8Array>({
      async pull(controller) {
        const { done, value } = await reader.read();
        if (done) {
          controller.close();
          return;
        }
        if (!fits(value)) {
          const what = eventStream ? "one message of its event stream" : "its answer";
          const err = new McpResponseTooLargeError(`${what} is larger than ${max} bytes (MCP_MAX_RESPONSE_BYTES)`);
          controller.error(err);
          await reader.cancel().catch(() => undefined);
          onTooLarge(err);
          return;
        }
        controller.enqueue(value);
      },
      async cancel(reason) {
        await reader.cancel(reason).catch(() => undefined);
      },
    });
    return new Response(body, { status: res.status, statusText: res.statusText, headers: res.headers });
  };
