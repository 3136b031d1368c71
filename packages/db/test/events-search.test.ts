import { newEvent } from "@tern/core";
import { createConversationFixture, createTestDatabase, type TestDatabase } from "@tern/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { eventsRepository } from "../src/repositories/events.ts";
import {
  type EventFilter,
  type EventOrder,
  type EventPosition,
  type EventsSearchRepository,
  eventsSearchRepository,
} from "../src/repositories/events-search.ts";

let database: TestDatabase;
let search: EventsSearchRepository;
let conversationId: string;
let ownerId: string;

beforeAll(async () => {
  database = await createTestDatabase();
  search = eventsSearchRepository(database.db);
  ({ conversationId, userId: ownerId } = await createConversationFixture(database.db));
  // 25 events: every fifth an AgentErrorEvent, the rest MessageEvents.
  const drafts = Array.from({ length: 25 }, (_, i) =>
    i % 5 === 0 ? newEvent.agentError(`error ${i}`) : newEvent.userMessage([{ type: "text", text: `${i}` }]),
  );
  await eventsRepository(database.db).append(conversationId, drafts);
});

afterAll(async () => {
  await database?.drop();
});

/** Follows the keyset cursor to the end; returns each page's seqs. */
const allPages = async (filter: EventFilter, order: EventOrder, limit: number): Promise<number[][]> => {
  const pages: number[][] = [];
  let after: EventPosition | null = null;
  for (;;) {
    const page = await search.page({ filter, order, after, limit });
    pages.push(page.events.map((e) => e.seq));
    const last = page.events.at(-1);
    if (!page.hasMore || !last) return pages;
    after = { timestamp: last.timestamp, seq: last.seq };
  }
};

describe("events search", () => {
  it("pages through every event once, ascending and descending, saying when more follow", async () => {
    const asc = await allPages({ conversationId }, "asc", 10);
    expect(asc.map((p) => p.length)).toEqual([10, 10, 5]);
    expect(asc.flat()).toEqual(Array.from({ length: 25 }, (_, i) => i + 1));
    const desc = await allPages({ conversationId }, "desc", 10);
    expect(desc.flat()).toEqual(Array.from({ length: 25 }, (_, i) => 25 - i));
    const exact = await search.page({ filter: { conversationId }, order: "asc", limit: 25 });
    expect(exact.hasMore).toBe(false);
  });

  it("filters by kind and by a time range [gte, lt), and counts the same set", async () => {
    const actions = (await allPages({ conversationId, kind: "AgentErrorEvent" }, "asc", 2)).flat();
    expect(actions).toEqual([1, 6, 11, 16, 21]);
    expect(await search.count({ conversationId, kind: "AgentErrorEvent" })).toBe(5);
    expect(await search.count({ conversationId })).toBe(25);

    const all = (await search.page({ filter: { conversationId }, order: "asc", limit: 100 })).events;
    // Bounds keep their microseconds: [event 5, event 10) is exactly events 5..9.
    const range = { conversationId, timestampGte: all[4]!.timestamp, timestampLt: all[9]!.timestamp };
    const within = await search.page({ filter: range, order: "asc", limit: 100 });
    expect(within.events.map((e) => e.seq)).toEqual([5, 6, 7, 8, 9]);
    expect(await search.count(range)).toBe(5);
    expect(await search.count({ ...range, kind: "AgentErrorEvent" })).toBe(1);
  });

  it("returns nothing for another conversation, and compiles a page for EXPLAIN", async () => {
    const other = await createConversationFixture(database.db);
    expect(await search.page({ filter: { conversationId: other.conversationId }, order: "asc", limit: 10 })).toEqual({
      events: [],
      hasMore: false,
    });
    const compiled = search.compilePage({
      filter: { conversationId, kind: "AgentErrorEvent" },
      order: "desc",
      limit: 10,
    });
    expect(compiled.sql).toMatch(/order by "timestamp" desc, "seq" desc limit \$\d+/);
  });

  it("answers every shape of request as the statement built for it would (compiled once per shape)", async () => {
    const all = (await search.page({ filter: { conversationId }, order: "asc", limit: 100 })).events;
    const at = (i: number) => ({ timestamp: all[i]!.timestamp, seq: all[i]!.seq });
    const filters: EventFilter[] = [
      { conversationId },
      { conversationId, ownerId },
      // Not the owner: the statement's own check leaves the page empty.
      { conversationId, ownerId: (await createConversationFixture(database.db)).userId },
      { conversationId, ownerId, kind: "AgentErrorEvent" },
      { conversationId, timestampGte: all[3]!.timestamp, timestampLt: all[20]!.timestamp },
      { conversationId, ownerId, kind: "MessageEvent", timestampGte: all[2]!.timestamp, source: "user" },
      { conversationId, source: "agent", timestampLt: all[17]!.timestamp },
    ];
    for (const filter of filters) {
      for (const order of ["asc", "desc"] as const) {
        for (const after of [null, at(order === "asc" ? 6 : 18)]) {
          for (const limit of [1, 4, 100]) {
            const req = { filter, order, after, limit };
            // Twice: the first call of a shape compiles it, the second reuses it.
            for (let i = 0; i < 2; i++) {
              const built = await database.db.executeQuery<{ seq: number }>(search.compilePage(req));
              const page = await search.page(req);
              expect(page.events.map((e) => e.seq)).toEqual(built.rows.slice(0, limit).map((r) => r.seq));
              expect(page.hasMore).toBe(built.rows.length > limit);
            }
          }
        }
      }
    }
  });
});
