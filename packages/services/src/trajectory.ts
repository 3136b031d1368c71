import { eventToJson, type StoredEvent } from "@tern/core";
import { type EventPosition, eventsSearchRepository } from "@tern/db";
import { Zip, ZipPassThrough } from "fflate";
import type { ServiceDeps } from "./deps.ts";

/** Events read from Postgres per round trip: the most the zip holds in memory at a time. */
const EVENTS_PER_READ = 500;

/** OpenHands' names: `event_{i:06d}_{id}.json` in timestamp order, and `meta.json`. */
export const trajectoryEntryName = (index: number, eventId: string): string =>
  `event_${String(index).padStart(6, "0")}_${eventId}.json`;

/**
 * A conversation's trajectory as a zip, produced as it is read: `meta.json` (the conversation
 * record, as the caller shaped it) and every event as JSON, in (timestamp, sequence) order, one
 * page of events at a time. Nothing is held whole: a consumer that reads slowly (the client's
 * connection) holds the next page back, since each chunk is produced only when asked for.
 */
export async function* trajectoryZip(
  deps: Pick<ServiceDeps, "db">,
  conversationId: string,
  meta: unknown,
): AsyncGenerator<Uint8Array> {
  const chunks: Uint8Array[] = [];
  let failure: Error | null = null;
  const zip = new Zip((err, chunk) => {
    if (err) failure = err;
    else chunks.push(chunk);
  });
  const encoder = new TextEncoder();
  // Stored, not deflated: an event is a few hundred bytes, which compress little on their own, and
  // a deflate stream per entry cost about seven times the time of the whole archive (10k events).
  const add = (name: string, value: unknown) => {
    const file = new ZipPassThrough(name);
    zip.add(file);
    file.push(encoder.encode(`${JSON.stringify(value, null, 2)}\n`), true);
  };
  const drain = function* () {
    if (failure) throw failure;
    yield* chunks.splice(0);
  };

  add("meta.json", meta);
  yield* drain();
  const events = eventsSearchRepository(deps.db);
  let after: EventPosition | null = null;
  let index = 0;
  for (;;) {
    const page = await events.page({ filter: { conversationId }, order: "asc", after, limit: EVENTS_PER_READ });
    for (const event of page.events as StoredEvent[]) add(trajectoryEntryName(index++, event.id), eventToJson(event));
    yield* drain();
    const last = page.events.at(-1);
    if (!page.hasMore || !last) break;
    after = { timestamp: last.timestamp, seq: last.seq };
  }
  zip.end();
  yield* drain();
}
