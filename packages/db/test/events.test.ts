import { newEvent, type StoredEvent, textOfContent } from "@tern/core";
import { createConversationFixture, createTestDatabase, type TestDatabase } from "@tern/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type EventsRepository, eventsRepository } from "../src/repositories/events.ts";

let database: TestDatabase;
let events: EventsRepository;

beforeAll(async () => {
  database = await createTestDatabase();
  events = eventsRepository(database.db);
});

afterAll(async () => {
  await database?.drop();
});

/** A user message whose text is `n`, so the order of a history can be read back. */
const note = (n: number) => newEvent.userMessage([{ type: "text", text: String(n) }]);
const numberOf = (e: StoredEvent): number =>
  e.kind === "MessageEvent" ? Number(textOfContent(e.payload.llm_message.content)) : Number.NaN;

describe("events: the one append path", () => {
  it("appends in order: sequence numbers from 1, timestamps strictly increasing, payloads kept", async () => {
    const { conversationId } = await createConversationFixture(database.db);
    const first = await events.append(conversationId, [note(1), note(2), note(3)]);
    const second = await events.append(conversationId, [note(4)]);
    expect([...first, ...second].map((e) => e.seq)).toEqual([1, 2, 3, 4]);
    const all = await events.listAll(conversationId);
    expect(all).toEqual([...first, ...second]);
    expect(all.map(numberOf)).toEqual([1, 2, 3, 4]);
    for (let i = 1; i < all.length; i++) expect(all[i]!.timestamp > all[i - 1]!.timestamp).toBe(true);
    expect(all[0]?.timestamp).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$/);
  });

  it("keeps one gapless order when many writers append to one conversation at once", async () => {
    const { conversationId } = await createConversationFixture(database.db);
    await Promise.all(
      Array.from({ length: 20 }, (_, w) => events.append(conversationId, [note(w * 10), note(w * 10 + 1)])),
    );
    const all = await events.listAll(conversationId);
    expect(all.map((e) => e.seq)).toEqual(Array.from({ length: 40 }, (_, i) => i + 1));
    for (let i = 1; i < all.length; i++) expect(all[i]!.timestamp > all[i - 1]!.timestamp).toBe(true);
    // Each writer's two events stay next to each other, in its order.
    for (let i = 0; i < all.length; i += 2) {
      expect(numberOf(all[i + 1]!) - numberOf(all[i]!)).toBe(1);
    }
  });

  it("keeps a caller's id, appends nothing when asked only-if-empty, and refuses no conversation", async () => {
    const { conversationId } = await createConversationFixture(database.db);
    const id = "00000000-0000-4000-8000-0000000000e1";
    const [made] = await events.append(conversationId, [{ ...note(1), id }], { onlyIfEmpty: true });
    expect(made?.id).toBe(id);
    expect(await events.append(conversationId, [note(2)], { onlyIfEmpty: true })).toEqual([]);
    expect((await events.listAll(conversationId)).map((e) => e.id)).toEqual([id]);
    expect(await events.append(conversationId, [])).toEqual([]);
    await expect(events.append("00000000-0000-4000-8000-000000000000", [note(1)])).rejects.toThrow(/does not exist/);
  });
});

describe("events: tenancy bounds (issue 11)", () => {
  it("refuses an append past maxEvents, atomically: nothing of it is stored", async () => {
    const { conversationId } = await createConversationFixture(database.db);
    await events.append(conversationId, [note(1), note(2)], { maxEvents: 3 });
    await expect(events.append(conversationId, [note(3), note(4)], { maxEvents: 3 })).rejects.toThrow(
      /limit of 3 events/,
    );
    await events.append(conversationId, [note(3)], { maxEvents: 3 });
    expect((await events.listAll(conversationId)).map(numberOf)).toEqual([1, 2, 3]);
  });

  it("reads for the agent the window, back to the run's start, and the head before them", async () => {
    const { conversationId } = await createConversationFixture(database.db);
    const system = newEvent.systemPrompt("You are a test.", []);
    await events.append(conversationId, [system, ...Array.from({ length: 30 }, (_, i) => note(i + 1))]);
    const windowed = await events.readForAgent(conversationId, { window: 5 });
    expect(windowed.head.map((e) => e.kind)).toEqual(["SystemPromptEvent", "MessageEvent"]);
    expect(numberOf(windowed.head[1] as StoredEvent)).toBe(1);
    expect(windowed.recent.map(numberOf)).toEqual([26, 27, 28, 29, 30]);
    expect(windowed.omitted).toBe(31 - 5 - 2);
    // The run began further back: its events are all read.
    const sinceRun = await events.readForAgent(conversationId, { window: 5, sinceSeq: 20 });
    expect(sinceRun.recent.map((e) => e.seq)).toEqual([20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31]);
    // A short conversation is read whole, with no head apart.
    const whole = await events.readForAgent(conversationId, { window: 100 });
    expect(whole).toMatchObject({ head: [], omitted: 0 });
    expect(whole.recent).toHaveLength(31);
  });

  it("finds the latest run's start", async () => {
    const { conversationId } = await createConversationFixture(database.db);
    expect(await events.lastRunStartSeq(conversationId)).toBeNull();
    await events.append(conversationId, [note(1), newEvent.executionStatus("running"), note(2)]);
    await events.append(conversationId, [newEvent.executionStatus("finished"), newEvent.executionStatus("running")]);
    expect(await events.lastRunStartSeq(conversationId)).toBe(5);
  });
});
