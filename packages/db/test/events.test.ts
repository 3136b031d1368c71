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

describe("events: tenancy bounds", () => {
  it("refuses an append past maxEvents, atomically: nothing of it is stored", async () => {
    const { conversationId } = await createConversationFixture(database.db);
    await events.append(conversationId, [note(1), note(2)], { maxEvents: 3 });
    await expect(events.append(conversationId, [note(3), note(4)], { maxEvents: 3 })).rejects.toThrow(
      /limit of 3 events/,
    );
    await events.append(conversationId, [note(3)], { maxEvents: 3 });
    expect((await events.listAll(conversationId)).map(numberOf)).toEqual([1, 2, 3]);
  });

  it("reads for the agent from the latest condensation's kept tail, with the head before it", async () => {
    const { conversationId } = await createConversationFixture(database.db);
    const system = newEvent.systemPrompt("You are a test.", []);
    await events.append(conversationId, [system, ...Array.from({ length: 30 }, (_, i) => note(i + 1))]);
    // Before any condensation the whole conversation is read, with no head apart.
    const whole = await events.readForAgent(conversationId);
    expect(whole.head).toEqual([]);
    expect(whole.recent).toHaveLength(31);
    const condensation = (keptFromSeq: number) =>
      newEvent.condensation({
        forgotten_event_ids: [],
        summary: "s",
        summary_offset: 2,
        kept_from_seq: keptFromSeq,
      });
    await events.append(conversationId, [condensation(10)]);
    await events.append(conversationId, [note(31), condensation(26)]);
    const read = await events.readForAgent(conversationId);
    expect(read.head.map((e) => e.kind)).toEqual(["SystemPromptEvent", "MessageEvent"]);
    expect(numberOf(read.head[1] as StoredEvent)).toBe(1);
    // The latest condensation's tail: events 26 to 31 (seq 27 to 32), the two condensations, note 31.
    expect(read.recent[0]?.seq).toBe(26);
    expect(read.recent.map((e) => e.kind).filter((k) => k === "CondensationEvent")).toHaveLength(2);
    expect(read.recent.at(-1)?.kind).toBe("CondensationEvent");
  });

  it("counts a run's responses and its pause in the database", async () => {
    const { conversationId } = await createConversationFixture(database.db);
    const answer = (id: string) => newEvent.agentMessage("a", { llm_response_id: id, history_seq: 0 });
    await events.append(conversationId, [answer("old"), newEvent.executionStatus("running")]);
    await events.append(conversationId, [answer("r1"), answer("r1"), answer("r2"), note(1)]);
    expect(await events.runProgress(conversationId, 2)).toEqual({ iterations: 2, pauseRequested: false });
    await events.append(conversationId, [newEvent.pause()]);
    expect(await events.runProgress(conversationId, 2)).toEqual({ iterations: 2, pauseRequested: true });
  });

  it("finds the latest run's start", async () => {
    const { conversationId } = await createConversationFixture(database.db);
    expect(await events.lastRunStartSeq(conversationId)).toBeNull();
    await events.append(conversationId, [note(1), newEvent.executionStatus("running"), note(2)]);
    await events.append(conversationId, [newEvent.executionStatus("finished"), newEvent.executionStatus("running")]);
    expect(await events.lastRunStartSeq(conversationId)).toBe(5);
  });
});
