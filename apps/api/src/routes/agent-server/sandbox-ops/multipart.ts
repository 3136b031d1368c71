import { BadRequestError, PayloadTooLargeError } from "@tern/core";

/**
 * One field of a multipart/form-data body, its content streamed as the request brings it (never
 * held whole): what `POST /api/file/upload` needs, where the agent server's `file` field may be
 * as large as the upload cap. The other fields are skipped. Past `maxBytes` of content the stream
 * errors with PayloadTooLargeError.
 */

type PartEvent = { type: "headers"; name: string | null } | { type: "data"; chunk: Uint8Array } | { type: "end" };

const CRLF = Buffer.from("\r\n");
const HEADERS_END = Buffer.from("\r\n\r\n");
const MAX_HEADER_BYTES = 16 * 1024;

const boundaryOf = (contentType: string | undefined): string => {
  const m = /^multipart\/form-data\s*;.*\bboundary=(?:"([^"]+)"|([^;\s]+))/i.exec(contentType ?? "");
  const boundary = m?.[1] ?? m?.[2];
  if (!boundary || boundary.length > 200) throw new BadRequestError("Expected a multipart/form-data body");
  return boundary;
};

async function* partsOf(body: ReadableStream<Uint8Array>, boundary: string): AsyncGenerator<PartEvent> {
  const reader = body.getReader();
  const delimiter = Buffer.from(`\r\n--${boundary}`);
  const keep = delimiter.length - 1;
  // A leading CRLF lets the first boundary match the same delimiter as the others.
  let buf: Buffer = Buffer.from(CRLF);
  const more = async (): Promise<boolean> => {
    const r = await reader.read();
    if (r.done) return false;
    buf = buf.length === 0 ? Buffer.from(r.value) : Buffer.concat([buf, r.value]);
    return true;
  };
  const malformed = () => new BadRequestError("Malformed multipart/form-data body");
  let state: "preamble" | "after" | "headers" | "data" = "preamble";
  try {
    for (;;) {
      if (state === "preamble" || state === "data") {
        const i = buf.indexOf(delimiter);
        if (i >= 0) {
          if (state === "data") {
            if (i > 0) yield { type: "data", chunk: buf.subarray(0, i) };
            yield { type: "end" };
          }
          buf = buf.subarray(i + delimiter.length);
          state = "after";
          continue;
        }
        if (buf.length > keep) {
          if (state === "data") yield { type: "data", chunk: buf.subarray(0, buf.length - keep) };
          buf = buf.subarray(buf.length - keep);
        }
        if (!(await more())) throw malformed();
        continue;
      }
      if (state === "after") {
        if (buf.length < 2 && !(await more())) throw malformed();
        if (buf.length < 2) continue;
        if (buf[0] === 0x2d && buf[1] === 0x2d) return;
        const nl = buf.indexOf(CRLF);
        if (nl < 0) {
          if (buf.length > MAX_HEADER_BYTES || !(await more())) throw malformed();
          continue;
        }
        buf = buf.subarray(nl + 2);
        state = "headers";
        continue;
      }
      const end = buf.indexOf(HEADERS_END);
      if (end < 0) {
        if (buf.length > MAX_HEADER_BYTES || !(await more())) throw malformed();
        continue;
      }
      const headers = buf.subarray(0, end).toString("utf8");
      buf = buf.subarray(end + HEADERS_END.length);
      const name = /content-disposition:[^\r\n]*?(?:^|[;\s])name="([^"]*)"/im.exec(headers)?.[1] ?? null;
      yield { type: "headers", name };
      state = "data";
    }
  } finally {
    reader.releaseLock();
  }
}

/**
 * The content of field `field` as a stream; resolves once its headers were read (BadRequestError
 * when the body has no such field).
 */
export const multipartField = async (
  body: ReadableStream<Uint8Array>,
  contentType: string | undefined,
  field: string,
  maxBytes: number,
): Promise<ReadableStream<Uint8Array>> => {
  const events = partsOf(body, boundaryOf(contentType));
  for (;;) {
    const next = await events.next();
    if (next.done) throw new BadRequestError(`The multipart body has no "${field}" field`);
    if (next.value.type === "headers" && next.value.name === field) break;
  }
  let total = 0;
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      try {
        const next = await events.next();
        if (next.done || next.value.type !== "data") {
          controller.close();
          await events.return(undefined);
          return;
        }
        total += next.value.chunk.byteLength;
        if (total > maxBytes) throw new PayloadTooLargeError(`The file is larger than ${maxBytes} bytes`);
        // A copy: the parser's buffer is reused.
        controller.enqueue(new Uint8Array(next.value.chunk));
      } catch (err) {
        controller.error(err);
        await events.return(undefined).catch(() => undefined);
      }
    },
    async cancel() {
      await events.return(undefined);
    },
  });
};
