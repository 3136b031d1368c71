import { BadRequestError } from "@tern/core";
import { decodePageCursor, type EventPosition, encodePageCursor } from "@tern/services";
import { z } from "zod";

/**
 * A stream's event ids: the event's keyset position, signed like the search's page_id but bound
 * to the conversation only (not to the filters), so any stream of the conversation (SSE or
 * WebSocket, any filter, any API replica or restart with the same CURSOR_SECRET) resumes from it.
 */
const position = z.object({ t: z.string().min(1), s: z.number().int().nonnegative() });
const scopeOf = (conversationId: string) => `events-stream|${conversationId}`;

export const encodeEventCursor = (secret: string, conversationId: string, p: EventPosition): string =>
  encodePageCursor(secret, scopeOf(conversationId), { t: p.timestamp, s: p.seq });

/** The position after which a resumed stream starts; BadRequestError for an id this stream never sent. */
export const decodeEventCursor = (secret: string, conversationId: string, raw: string, what: string): EventPosition => {
  try {
    const p = decodePageCursor(secret, scopeOf(conversationId), raw.trim(), position);
    return { timestamp: p.t, seq: p.s };
  } catch {
    throw new BadRequestError(`${what}: not an event id this conversation's stream sent`);
  }
};
