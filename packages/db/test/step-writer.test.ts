import { randomUUID } from "node:crypto";
import { EventLimitError, newEvent } from "@tern/core";
import { createConversationFixture, createTestDatabase, type TestDatabase } from "@tern/testing";
import { sql } from "kysely";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  type AgentRunsRepository,
  agentRunsRepository,
  type RunLease,
  RunLeaseLostError,
} from "../src/repositories/agent-runs.ts";
import { conversationsRepository } from "../src/repositories/conversations.ts";
import { eventsRepository } from "../src/repositories/events.ts";
import { stepWriterOf } from "../src/repositories/step-writer.ts";

let database: TestDatabase;
let runs: AgentRunsRepository;

beforeAll(async () => {
  database = await createTestDatabase();
  runs = agentRunsRepository(database.db);
});

afterAll(async () => {
  await database?.drop();
});

const message = (text: string) => newEvent.agentMessage(text, { llm_response_id: "r", history_seq: 0 });

const started = async (): Promise<RunLease> => {
  const { conversationId } = await createConversationFixture(database.db);
  const begun = await runs.begin(conversationId, randomUUID());
  if (begun.outcome !== "started") throw new Error(`run did not start: ${begun.outcome}`);
  return begun.lease;
};

/** The transactions (xmin) that wrote a conversation's events after its `running` event. */
const writers = async (conversationIds: string[]) =>
  (
    await sql<{ x: string }>`
      select distinct xmin::text as x from events where conversation_id = any(${conversationIds}::uuid[]) and seq > 1
    `.execute(database.db)
  ).rows.map((r) => r.x);

const texts = async (conversationId: string) =>
  (await eventsRepository(database.db).listAll(conversationId))
    .filter((e) => e.kind === "MessageEvent")
    .map((e) => (e.payload as { llm_message: { content: { text: string }[] } }).llm_message.content[0]?.text);

const usage = { add: { llm_calls: 1, prompt_tokens: 100, accumulated_cost: 0.25 } };

describe("group commit of the agent's step writes", () => {
  it("refuses a stale run's step while its neighbours in the same group commit", async () => {
    const neighbours = await Promise.all(Array.from({ length: 6 }, started));
    const stale = await started();
    // A new attempt of the same run (its worker died, the job was handed on): the old lease is stale.
    const resumed = await runs.begin(stale.conversationId, stale.runId);
    if (resumed.outcome !== "resumed") throw new Error(resumed.outcome);
    const before = stepWriterOf(database.db).stats.groups;

    // All asked in the same turn of the event loop: one group.
    const results = await Promise.allSettled([
      ...neighbours.map((l) => runs.appendStep(l, [message("n1"), message("n2")], { metrics: usage })),
      runs.appendStep(stale, [message("stale")], { metrics: usage }),
    ]);

    expect(stepWriterOf(database.db).stats.groups - before).toBe(1);
    const refused = results.at(-1);
    expect(refused?.status).toBe("rejected");
    expect((refused as PromiseRejectedResult).reason).toBeInstanceOf(RunLeaseLostError);
    for (const r of results.slice(0, -1)) expect(r.status).toBe("fulfilled");
    // The neighbours' steps committed, in one transaction, with their usage.
    expect(await writers(neighbours.map((l) => l.conversationId))).toHaveLength(1);
    for (const l of neighbours) {
      expect(await texts(l.conversationId)).toEqual(["n1", "n2"]);
      expect((await conversationsRepository(database.db).get(l.conversationId))?.metrics).toMatchObject({
        llm_calls: 1,
        prompt_tokens: 100,
        accumulated_cost: 0.25,
      });
    }
    // The stale step wrote nothing: no event, no usage.
    expect(await texts(stale.conversationId)).toEqual([]);
    expect((await conversationsRepository(database.db).get(stale.conversationId))?.metrics).not.toMatchObject({
      llm_calls: 1,
    });
  });

  it("commits the current attempt's step when a stale attempt's step for the same conversation comes with it", async () => {
    const stale = await started();
    const resumed = await runs.begin(stale.conversationId, stale.runId);
    if (resumed.outcome !== "resumed") throw new Error(resumed.outcome);
    const neighbour = await started();
    const [old, current, other] = await Promise.allSettled([
      runs.appendStep(stale, [message("old")]),
      runs.appendStep(resumed.lease, [message("current")]),
      runs.appendStep(neighbour, [message("other")]),
    ]);
    expect((old as PromiseRejectedResult).reason).toBeInstanceOf(RunLeaseLostError);
    expect(current.status).toBe("fulfilled");
    expect(other.status).toBe("fulfilled");
    expect(await texts(stale.conversationId)).toEqual(["current"]);
    expect(await texts(neighbour.conversationId)).toEqual(["other"]);
  });

  it("refuses a step past the event limit alone", async () => {
    const [full, ok] = await Promise.all([started(), started()]);
    const results = await Promise.allSettled([
      runs.appendStep(full, [message("a"), message("b"), message("c")], { maxEvents: 2 }),
      runs.appendStep(ok, [message("a"), message("b"), message("c")], { maxEvents: 10 }),
    ]);
    expect((results[0] as PromiseRejectedResult).reason).toBeInstanceOf(EventLimitError);
    expect(results[1].status).toBe("fulfilled");
    expect(await texts(full.conversationId)).toEqual([]);
    expect(await texts(ok.conversationId)).toEqual(["a", "b", "c"]);
  });

  it("fails only the step Postgres rejects: the group is written again one step at a time", async () => {
    const leases = await Promise.all(Array.from({ length: 4 }, started));
    const writer = stepWriterOf(database.db);
    const fallbacks = writer.stats.fallbacks;
    const bad = { ...message("bad"), id: "not-a-uuid" };
    const results = await Promise.allSettled([
      runs.appendStep(leases[0] as RunLease, [bad]),
      ...leases.slice(1).map((l) => runs.appendStep(l, [message("good")])),
    ]);
    expect(writer.stats.fallbacks - fallbacks).toBe(1);
    expect(results[0]?.status).toBe("rejected");
    for (const r of results.slice(1)) expect(r.status).toBe("fulfilled");
    expect(await texts(leases[0]?.conversationId as string)).toEqual([]);
    for (const l of leases.slice(1)) expect(await texts(l.conversationId)).toEqual(["good"]);
  });

  it("answers each step with its events exactly as stored, timestamps to the microsecond", async () => {
    const leases = await Promise.all(Array.from({ length: 3 }, started));
    // The last event just before a millisecond, a second and a year turn: the step's events are
    // computed back from the row's last timestamp, and must borrow across all three.
    const [edge] = leases;
    await sql`
      update conversations set last_event_at = '2029-12-31T23:59:59.999998Z'
      where id = ${edge?.conversationId}::uuid
    `.execute(database.db);
    const steps = await Promise.all(
      leases.map((l) => runs.appendStep(l, [message("a"), message("b"), message("c")], { metrics: usage })),
    );
    expect(steps[0]?.events.map((e) => e.timestamp)).toEqual([
      "2029-12-31T23:59:59.999999Z",
      "2030-01-01T00:00:00.000000Z",
      "2030-01-01T00:00:00.000001Z",
    ]);
    for (const [i, l] of leases.entries()) {
      const stored = await eventsRepository(database.db).listAll(l.conversationId);
      expect(steps[i]?.events).toEqual(stored.slice(1));
      expect(steps[i]?.metrics).toMatchObject({ llm_calls: 1, prompt_tokens: 100, accumulated_cost: 0.25 });
    }
  });

  it("keeps each conversation's steps in order and contiguous, many runs writing at once", async () => {
    const leases = await Promise.all(Array.from({ length: 16 }, started));
    await Promise.all(
      leases.map(async (l) => {
        for (let i = 0; i < 10; i++) {
          const step = await runs.appendStep(l, [message(`${i}a`), message(`${i}b`), message(`${i}c`)]);
          expect(step.events.map((e) => e.seq)).toEqual([2 + 3 * i, 3 + 3 * i, 4 + 3 * i]);
        }
      }),
    );
    for (const l of leases) {
      const all = await eventsRepository(database.db).listAll(l.conversationId);
      expect(all.map((e) => e.seq)).toEqual(Array.from({ length: 31 }, (_, i) => i + 1));
      const ts = all.map((e) => e.timestamp);
      expect([...ts].sort()).toEqual(ts);
      expect(new Set(ts).size).toBe(ts.length);
      expect(await texts(l.conversationId)).toEqual(
        Array.from({ length: 10 }, (_, i) => [`${i}a`, `${i}b`, `${i}c`]).flat(),
      );
    }
    // Fewer commits than writes: the steps shared them.
    const { groups, writes } = stepWriterOf(database.db).stats;
    expect(groups).toBeLessThan(writes);
  });
});
