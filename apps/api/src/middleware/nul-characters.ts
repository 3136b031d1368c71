import { ValidationError } from "@tern/core";
import type { Context, MiddlewareHandler } from "hono";

const NUL = "\u0000";
/** `\u0000` in JSON text: a NUL in a string once parsed (an even run of backslashes before it is escaped text, not a NUL). */
const ESCAPED_NUL = /(?<!\\)(?:\\\\)*\\u0000/i;

/** Whether `text` holds a NUL character, raw or as JSON's escape: what every client text is checked for. */
export const holdsNul = (text: string): boolean => text.includes(NUL) || ESCAPED_NUL.test(text);

const hasBody = (c: Context) => c.req.method !== "GET" && c.req.method !== "HEAD";

/**
 * Refuses (422) a request whose query or body holds a NUL character (U+0000): Postgres keeps none
 * in text or jsonb, so such a value would otherwise fail deep in a query as a 500, after part of
 * the work was done. Found by the input fuzz (a `title__contains` with %00).
 *
 * The body is read as text whatever its Content-Type says: a route that parses JSON parses a body
 * labelled text/plain (or nothing) just as well. The app's body limit (1 MiB) runs first, so this
 * holds at most that. `streamed` names the routes whose body is a file's own bytes, streamed under
 * their own cap (the agent server's upload): those are never read here.
 */
export const rejectNulCharacters =
  (opts: { streamed?: (path: string) => boolean } = {}): MiddlewareHandler =>
  async (c, next) => {
    // Decoding the query makes a NUL only of "%00" (an HTTP parser refuses a raw one): without
    // either in the URL there is none to find, and the hot reads skip parsing their URL again.
    const url = c.req.url;
    const query = url.includes("%00") || url.includes(NUL) ? new URL(url).searchParams : [];
    for (const [name, value] of query) {
      if (name.includes(NUL) || value.includes(NUL)) {
        throw new ValidationError(`query parameter ${JSON.stringify(name.replaceAll(NUL, ""))} holds a NUL character`, [
          { field: name.replaceAll(NUL, ""), in: "query", message: "must not contain NUL characters (U+0000)" },
        ]);
      }
    }
    if (hasBody(c) && !opts.streamed?.(c.req.path) && holdsNul(await c.req.text())) {
      throw new ValidationError("the body holds a NUL character", [
        { field: "", in: "body", message: "strings must not contain NUL characters (U+0000)" },
      ]);
    }
    await next();
  };
