import { type EventDraft, type EventKind, type StoredEvent, toHexId } from "@tern/core";
import { eventsRepository } from "@tern/db";
import { createConversationFixture, sampleEvent, scaled } from "@tern/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestApi, type TestApi } from "./harness.ts";

let api: TestApi;
let owner: { key: string; userId: string };
let conversation: string;
let all: StoredEvent[];

const KINDS: EventKind[] = ["MessageEvent", "ActionEvent", "ObservationEvent", "AgentErrorEvent"];
const TOTAL = 2_400;

interface Page {
  items: { id: string; kind: string; source: string; timestamp: string; [k: string]: unknown }[];
  next_page_id: string | null;
}

const drafts = (n: number, offset: number): EventDraft[] =>
  Array.from({ length: n }, (_, i) => ({
    // A pseudo-random but reproducible mix of kinds.
    ...sampleEvent(KINDS[(((offset + i) * 7919) % 13) % KINDS.length] as EventKind, offset + i),
    source: "agent",
  }));

const search = (qs: string, key = owner.key, id = conversation) =>
  api.call(`/api/v1/conversation/${id}/events/search${qs ? `?${qs}` : ""}`, { key });

/** Follows next_page_id to the end; `between` runs after each page (for appends). */
const collect = async (params: Record<string, string>, between?: () => Promise<void>): Promise<Page["items"]> => {
  const items: Page["items"] = [];
  let pageId: string | null = null;
  do {
    const qs = new URLSearchParams({ ...params, ...(pageId ? { page_id: pageId } : {}) }).toString();
    const res = await search(qs);
    expect(res.status, qs).toBe(200);
    const page = (await res.json()) as Page;
    expect(page.items.length).toBeLessThanOrEqual(Number(params.limit ?? 100));
    items.push(...page.items);
    pageId = page.next_page_id;
    if (pageId && between) await between();
  } while (pageId);
  return items;
};

const ids = (events: { id: string }[]) => events.map((e) => e.id);

beforeAll(async () => {
  api = await startTestApi();
  owner = await api.newUser();
  conversation = toHexId((await createConversationFixture(api.database.db, { userId: owner.userId })).conversationId);
  const repo = eventsRepository(api.database.db);
  const id = (await createConversationFixture(api.database.db, { userId: owner.userId })).conversationId;
  await repo.append(id, drafts(5, 0)); // another conversation's events must never show up
  for (let done = 0; done < TOTAL; done += 400) await repo.append(toUuid(conversation), drafts(400, done));
  all = await repo.listAll(toUuid(conversation));
}, scaled(120_000));
afterAll(async () => api?.close());

const toUuid = (hex: string) => hex.replace(/^(.{8})(.{4})(.{4})(.{4})/, "$1-$2-$3-$4-");

describe("events search", () => {
  it("returns events oldest first by default, as { id, kind, source, timestamp, ...payload }", async () => {
    const res = await search("limit=3");
    expect(res.status).toBe(200);
    const page = (await res.json()) as Page;
    expect(page.items).toHaveLength(3);
    expect(page.items[0]).toEqual({
      id: all[0]?.id,
      kind: all[0]?.kind,
      source: "agent",
      timestamp: all[0]?.timestamp,
      llm_message: { role: "assistant", content: [{ type: "text", text: "event 0" }] },
      llm_response_id: "response-0",
      history_seq: 0,
    });
    expect(page.items[0]?.timestamp).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$/);
    expect(typeof page.next_page_id).toBe("string");
  });

  it("defaults to 100 per page and pages by 100 and by 7 to the same set, in order, without duplicates", async () => {
    const first = (await (await search("")).json()) as Page;
    expect(first.items).toHaveLength(100);
    const by100 = await collect({ limit: "100" });
    expect(ids(by100)).toEqual(ids(all));
    // A page size that divides neither 100 nor the total: cursors fall everywhere (343 requests).
    const by7 = await collect({ limit: "7" });
    expect(ids(by7)).toEqual(ids(all));
    expect(new Set(ids(by7)).size).toBe(TOTAL);
  });

  it("sorts newest first with sort_order=TIMESTAMP_DESC", async () => {
    const desc = await collect({ limit: "100", sort_order: "TIMESTAMP_DESC" });
    expect(ids(desc)).toEqual(ids([...all].reverse()));
    const by7 = await collect({ limit: "7", sort_order: "TIMESTAMP_DESC", kind__eq: "ActionEvent" });
    expect(ids(by7)).toEqual(ids([...all].reverse().filter((e) => e.kind === "ActionEvent")));
  });

  it("filters by kind", async () => {
    for (const kind of KINDS) {
      const got = await collect({ limit: "100", kind__eq: kind });
      const want = all.filter((e) => e.kind === kind);
      expect(want.length).toBeGreaterThan(50);
      expect(ids(got)).toEqual(ids(want));
    }
    expect(await collect({ kind__eq: "PauseEvent" })).toEqual([]);
  });

  it("treats timestamp__gte as inclusive and timestamp__lt as exclusive, to the microsecond", async () => {
    const from = all[500] as StoredEvent;
    const to = all[1700] as StoredEvent;
    const got = await collect({ limit: "100", timestamp__gte: from.timestamp, timestamp__lt: to.timestamp });
    expect(ids(got)).toEqual(ids(all.slice(500, 1700)));
    // One microsecond later excludes the first; the same window with a kind and descending.
    const later = from.timestamp.replace(/(\d{6})Z$/, (m) => `${String(Number(m.slice(0, 6)) + 1).padStart(6, "0")}Z`);
    expect(later).not.toBe(from.timestamp);
    const shifted = await collect({ timestamp__gte: later, timestamp__lt: to.timestamp });
    expect(ids(shifted)).toEqual(ids(all.slice(501, 1700)));
    const kindDesc = await collect({
      limit: "33",
      kind__eq: "ObservationEvent",
      sort_order: "TIMESTAMP_DESC",
      timestamp__gte: from.timestamp,
      timestamp__lt: to.timestamp,
    });
    expect(ids(kindDesc)).toEqual(
      ids(
        all
          .slice(500, 1700)
          .filter((e) => e.kind === "ObservationEvent")
          .reverse(),
      ),
    );
  });

  it("reads a timestamp without a zone as UTC, and honours an explicit offset", async () => {
    const at = all[1000] as StoredEvent;
    const noZone = at.timestamp.replace(/Z$/, "");
    expect(ids(await collect({ timestamp__gte: noZone }))).toEqual(ids(all.slice(1000)));
    // The same instant written two hours ahead of UTC.
    const d = new Date(at.timestamp);
    d.setUTCHours(d.getUTCHours() + 2);
    const plusTwo = `${d.toISOString().slice(0, 19)}.${at.timestamp.slice(20, 26)}+02:00`;
    expect(ids(await collect({ timestamp__lt: plusTwo }))).toEqual(ids(all.slice(0, 1000)));
  });

  it("counts with the same filters, as a bare integer", async () => {
    const count = async (qs: string) => {
      const res = await api.call(`/api/v1/conversation/${conversation}/events/count${qs ? `?${qs}` : ""}`, {
        key: owner.key,
      });
      expect(res.status).toBe(200);
      return (await res.json()) as number;
    };
    expect(await count("")).toBe(TOTAL);
    expect(await count("kind__eq=MessageEvent")).toBe(all.filter((e) => e.kind === "MessageEvent").length);
    const from = all[100] as StoredEvent;
    const to = all[200] as StoredEvent;
    const q = new URLSearchParams({
      kind__eq: "ActionEvent",
      timestamp__gte: from.timestamp,
      timestamp__lt: to.timestamp,
    });
    expect(await count(q.toString())).toBe(all.slice(100, 200).filter((e) => e.kind === "ActionEvent").length);
    expect(
      (await api.call(`/api/v1/conversation/${conversation}/events/count?kind__eq=Nope`, { key: owner.key })).status,
    ).toBe(422);
  });

  it("gives null next_page_id on the last page, also when the last page is exactly full", async () => {
    const exact = (await (
      await search(`limit=100&timestamp__lt=${encodeURIComponent(all[100]?.timestamp ?? "")}`)
    ).json()) as Page;
    expect(exact.items).toHaveLength(100);
    expect(exact.next_page_id).toBeNull();
  });

  it("returns every event exactly once while events are appended during paging", async () => {
    const repo = eventsRepository(api.database.db);
    const extra = await api.database.db.selectFrom("events").select("id").execute();
    const before = extra.length;
    let appended = 0;
    const asc = await collect({ limit: "97" }, async () => {
      await repo.append(toUuid(conversation), drafts(13, 10_000 + appended));
      appended += 13;
    });
    const now = await repo.listAll(toUuid(conversation));
    expect(appended).toBeGreaterThan(0);
    expect(ids(asc)).toEqual(ids(now));
    expect(new Set(ids(asc)).size).toBe(asc.length);
    // Newest first, appends land before the cursor: the events that existed are each returned once.
    const existing = now;
    const desc = await collect({ limit: "89", sort_order: "TIMESTAMP_DESC" }, async () => {
      await repo.append(toUuid(conversation), drafts(5, 20_000));
    });
    expect(ids(desc)).toEqual(ids([...existing].reverse()));
    all = await repo.listAll(toUuid(conversation));
    expect((await api.database.db.selectFrom("events").select("id").execute()).length).toBeGreaterThan(before);
  });

  it("refuses a forged, altered or foreign page_id with 400", async () => {
    const page = (await (await search("limit=10")).json()) as Page;
    const cursor = page.next_page_id ?? "";
    expect((await search(`limit=10&page_id=${cursor}`)).status).toBe(200);
    const [body = "", mac = ""] = cursor.split(".");
    const position = JSON.parse(Buffer.from(body, "base64url").toString()) as { t: string; s: number };
    const forgedBody = Buffer.from(JSON.stringify({ ...position, s: 0 })).toString("base64url");
    for (const bad of [
      "garbage",
      `${forgedBody}.${mac}`,
      `${body}.${mac.slice(0, -2)}AA`,
      `${body}`,
      `${body}.${mac}.x`,
      Buffer.from(JSON.stringify({ offset: 10 })).toString("base64url"),
    ]) {
      const res = await search(`limit=10&page_id=${encodeURIComponent(bad)}`);
      expect(res.status, bad).toBe(400);
      expect(((await res.json()) as { error: { code: string } }).error.code).toBe("bad_request");
    }
    // Bound to its search: another filter, order or conversation refuses it.
    expect((await search(`limit=10&kind__eq=MessageEvent&page_id=${cursor}`)).status).toBe(400);
    expect((await search(`limit=10&sort_order=TIMESTAMP_DESC&page_id=${cursor}`)).status).toBe(400);
    const other = toHexId((await createConversationFixture(api.database.db, { userId: owner.userId })).conversationId);
    expect((await search(`limit=10&page_id=${cursor}`, owner.key, other)).status).toBe(400);
  });

  it("refuses a bad limit, kind, timestamp or sort order with 422 naming the parameter", async () => {
    for (const [qs, field] of [
      ["limit=0", "limit"],
      ["limit=101", "limit"],
      ["limit=-1", "limit"],
      ["limit=ten", "limit"],
      ["limit=1.5", "limit"],
      ["kind__eq=NoSuchEvent", "kind__eq"],
      ["timestamp__gte=yesterday", "timestamp__gte"],
      ["timestamp__lt=2026-13-01T00:00:00Z", "timestamp__lt"],
      ["sort_order=RANDOM", "sort_order"],
    ]) {
      const res = await search(qs as string);
      expect(res.status, qs).toBe(422);
      const error = ((await res.json()) as { error: { code: string; message: string } }).error;
      expect(error.code).toBe("validation_failed");
      expect(error.message.startsWith(`${field}: `), error.message).toBe(true);
    }
  });

  it("answers 404 for another user's conversation, an unknown one and a malformed id", async () => {
    const stranger = await api.newUser();
    expect((await search("", stranger.key)).status).toBe(404);
    expect((await api.call(`/api/v1/conversation/${conversation}/events/count`, { key: stranger.key })).status).toBe(
      404,
    );
    expect((await search("", owner.key, "0".repeat(32))).status).toBe(404);
    expect((await search("", owner.key, "not-an-id")).status).toBe(404);
    expect((await search("", owner.key, toUuid(conversation))).status).toBe(200);
    // The owner check rides in the page's own statement: a stranger's filters that match nothing,
    // or a stranger's cursor of their own, still answer 404, never an empty page or a 400.
    expect((await search("kind__eq=ConversationStateUpdateEvent", stranger.key)).status).toBe(404);
    const theirs = toHexId(
      (await createConversationFixture(api.database.db, { userId: stranger.userId })).conversationId,
    );
    await eventsRepository(api.database.db).append(toUuid(theirs), drafts(3, 0));
    const theirPage = (await (await search("limit=1", stranger.key, theirs)).json()) as Page;
    expect(theirPage.next_page_id).toEqual(expect.any(String));
    expect((await search(`limit=1&page_id=${theirPage.next_page_id}`, stranger.key)).status).toBe(404);
    // An owner's conversation with nothing matching is an empty page.
    const empty = await search("kind__eq=ConversationStateUpdateEvent");
    expect(empty.status).toBe(200);
    expect(await empty.json()).toEqual({ items: [], next_page_id: null });
  });
});
