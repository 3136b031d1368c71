import { randomUUID } from "node:crypto";
import { EventLimitError, newEvent } from "@tern/core";
import { createConversationFixture, createTestDatabase, type TestDatabase, waitFor } from "@tern/testing";
import { sql } from "kysely";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createChangeFeed } from "../src/change-feed.ts";
import {
  type AgentRunsRepository,
  agentRunsRepository,
  type RunLease,
  RunLeaseLostError,
} from "../src/repositories/agent-runs.ts";
import { conversationsRepository } from "../src/repositories/conversations.ts";
import { eventsRepository } from "../src/repositories/events.ts";
import { webhooksRepository } from "../src/repositories/webhooks.ts";

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

const conversation = async () => (await createConversationFixture(database.db)).conversationId;

const leaseOf = (result: Awaited<ReturnType<AgentRunsRepository["begin"]>>): RunLease => {
  if (result.outcome !== "started" && result.outcome !== "resumed") throw new Error(`no lease: ${result.outcome}`);
  return result.lease;
};

const kinds = async (conversationId: string) =>
  (await eventsRepository(database.db).listAll(conversationId)).map((e) =>
    e.kind === "ConversationStateUpdateEvent" ? `status:${e.payload.value}` : e.kind,
  );

describe("agent runs: the run lock", () => {
  it("starts a run on a free conversation: running, with its event, and the lock held", async () => {
    const id = await conversation();
    const runId = randomUUID();
    const begun = await runs.begin(id, runId);
    expect(begun).toMatchObject({ outcome: "started", lease: { conversationId: id, runId, attempt: 1 } });
    expect(await runs.activeRun(id)).toBe(runId);
    expect((await conversationsRepository(database.db).get(id))?.executionStatus).toBe("running");
    expect(await kinds(id)).toEqual(["status:running"]);
  });

  it("answers busy to another run, ended to a run that is over, missing to no conversation", async () => {
    const id = await conversation();
    const first = randomUUID();
    const lease = leaseOf(await runs.begin(id, first));
    expect(await runs.begin(id, randomUUID())).toEqual({ outcome: "busy", activeRunId: first });
    await runs.end(lease, "finished", [message("done")]);
    expect(await runs.activeRun(id)).toBeNull();
    expect(await runs.begin(id, first)).toEqual({ outcome: "ended" });
    expect(await runs.begin(randomUUID(), randomUUID())).toEqual({ outcome: "missing" });
    expect(await kinds(id)).toEqual(["status:running", "MessageEvent", "status:finished"]);
    const row = await database.db.selectFrom("agent_runs").selectAll().where("id", "=", first).executeTakeFirst();
    expect(row).toMatchObject({ status: "finished", attempts: 1 });
    expect(row?.ended_at).not.toBeNull();
  });

  it("resumes the same run as a new attempt, writing no second running event", async () => {
    const id = await conversation();
    const runId = randomUUID();
    leaseOf(await runs.begin(id, runId));
    const resumed = await runs.begin(id, runId);
    expect(resumed).toMatchObject({ outcome: "resumed", lease: { runId, attempt: 2 } });
    expect(await kinds(id)).toEqual(["status:running"]);
    const row = await database.db
      .selectFrom("agent_runs")
      .select("attempts")
      .where("id", "=", runId)
      .executeTakeFirst();
    expect(row?.attempts).toBe(2);
  });
});

describe("agent runs: the fencing of a superseded attempt", () => {
  it("refuses appends and the end of a lease whose attempt was superseded, and keeps the new one's", async () => {
    const id = await conversation();
    const runId = randomUUID();
    const stale = leaseOf(await runs.begin(id, runId));
    const current = leaseOf(await runs.begin(id, runId)); // its worker died; BullMQ handed the job on
    expect(current.attempt).toBe(stale.attempt + 1);

    await expect(runs.append(stale, [message("from the dead worker")])).rejects.toBeInstanceOf(RunLeaseLostError);
    await expect(runs.end(stale, "finished")).rejects.toBeInstanceOf(RunLeaseLostError);
    expect(await kinds(id)).toEqual(["status:running"]);
    expect(await runs.activeRun(id)).toBe(runId);

    await runs.append(current, [message("from the live worker")]);
    await runs.end(current, "finished");
    expect(await kinds(id)).toEqual(["status:running", "MessageEvent", "status:finished"]);
    // Ended: the lease is gone for every attempt.
    await expect(runs.append(current, [message("late")])).rejects.toBeInstanceOf(RunLeaseLostError);
  });

  it("refuses a lease once another run holds the conversation", async () => {
    const id = await conversation();
    const first = randomUUID();
    const lease = leaseOf(await runs.begin(id, first));
    expect(await runs.abandon(id, first, [])).toBe(true);
    leaseOf(await runs.begin(id, randomUUID()));
    await expect(runs.append(lease, [message("stale")])).rejects.toBeInstanceOf(RunLeaseLostError);
  });
});

describe("agent runs: abandon and pause", () => {
  it("abandons only the run that holds the lock, ending the conversation in error", async () => {
    const id = await conversation();
    const runId = randomUUID();
    leaseOf(await runs.begin(id, runId));
    expect(await runs.abandon(id, randomUUID(), [])).toBe(false);
    expect(await runs.abandon(id, runId, [newEvent.agentError("lost")])).toBe(true);
    expect(await runs.activeRun(id)).toBeNull();
    expect((await conversationsRepository(database.db).get(id))?.executionStatus).toBe("error");
    expect(await kinds(id)).toEqual(["status:running", "AgentErrorEvent", "status:error"]);
    expect(await runs.abandon(id, runId, [])).toBe(false);
  });

  it("pauses at once without a run, and leaves a running run to stop itself", async () => {
    const idle = await conversation();
    expect(await runs.requestPause(idle)).toEqual({ activeRunId: null });
    expect((await conversationsRepository(database.db).get(idle))?.executionStatus).toBe("paused");
    expect(await kinds(idle)).toEqual(["PauseEvent", "status:paused"]);
    // Paused already: one more PauseEvent, no second status change.
    await runs.requestPause(idle);
    expect(await kinds(idle)).toEqual(["PauseEvent", "status:paused", "PauseEvent"]);

    const busy = await conversation();
    const runId = randomUUID();
    leaseOf(await runs.begin(busy, runId));
    expect(await runs.requestPause(busy)).toEqual({ activeRunId: runId });
    expect((await conversationsRepository(database.db).get(busy))?.executionStatus).toBe("running");
    expect(await kinds(busy)).toEqual(["status:running", "PauseEvent"]);
    expect(await runs.requestPause(randomUUID())).toBeNull();
  });
});

/** One step of an agent's run as the repository sees it: three events written together. */
const stepDrafts = (n: number) => [
  message(`step ${n}: thinking`),
  newEvent.agentError(`step ${n}: a bad call`),
  message(`step ${n}: answer`),
];

const textsOf = async (conversationId: string) =>
  (await eventsRepository(database.db).listAll(conversationId)).map((e) =>
    e.kind === "MessageEvent"
      ? JSON.stringify(e.payload.llm_message.content)
      : e.kind === "AgentErrorEvent"
        ? e.payload.error
        : e.kind,
  );

const metricsOf = async (conversationId: string) =>
  (await conversationsRepository(database.db).get(conversationId))?.metrics;

describe("agent runs: a step's events in one write", () => {
  it("appends a step's events in order with contiguous seqs, and adds its LLM usage in the same write", async () => {
    const id = await conversation();
    const lease = leaseOf(await runs.begin(id, randomUUID()));
    const usage = { add: { llm_calls: 1, prompt_tokens: 100, accumulated_cost: 0.25 }, set: { per_turn_token: 107 } };
    const first = await runs.appendStep(lease, stepDrafts(1), { metrics: usage });
    expect(first.events.map((e) => e.seq)).toEqual([2, 3, 4]);
    expect(first.metrics).toMatchObject({
      llm_calls: 1,
      prompt_tokens: 100,
      accumulated_cost: 0.25,
      per_turn_token: 107,
    });
    const second = await runs.appendStep(lease, stepDrafts(2), { metrics: usage });
    expect(second.events.map((e) => e.seq)).toEqual([5, 6, 7]);
    expect(second.metrics).toMatchObject({
      llm_calls: 2,
      prompt_tokens: 200,
      accumulated_cost: 0.5,
      per_turn_token: 107,
    });
    expect(await metricsOf(id)).toMatchObject({ llm_calls: 2, prompt_tokens: 200, accumulated_cost: 0.5 });
    const stored = await eventsRepository(database.db).listAll(id);
    expect(stored.slice(1)).toEqual([...first.events, ...second.events]);
    for (let i = 1; i < stored.length; i++) expect(stored[i]!.timestamp > stored[i - 1]!.timestamp).toBe(true);
  });

  it("keeps each step's events together while other writers append to the conversation at once", async () => {
    const id = await conversation();
    const lease = leaseOf(await runs.begin(id, randomUUID()));
    const events = eventsRepository(database.db);
    await Promise.all([
      (async () => {
        for (let n = 0; n < 10; n++) await runs.appendStep(lease, stepDrafts(n));
      })(),
      (async () => {
        for (let n = 0; n < 10; n++)
          await events.append(id, [newEvent.userMessage([{ type: "text", text: `user ${n}` }])]);
      })(),
    ]);
    const stored = await events.listAll(id);
    expect(stored.map((e) => e.seq)).toEqual(stored.map((_, i) => i + 1));
    const texts = await textsOf(id);
    for (let n = 0; n < 10; n++) {
      const at = texts.indexOf(JSON.stringify([{ type: "text", text: `step ${n}: thinking` }]));
      expect(texts.slice(at, at + 3)).toEqual([
        JSON.stringify([{ type: "text", text: `step ${n}: thinking` }]),
        `step ${n}: a bad call`,
        JSON.stringify([{ type: "text", text: `step ${n}: answer` }]),
      ]);
    }
  });

  it("writes nothing of a superseded attempt's step: no event, no metrics", async () => {
    const id = await conversation();
    const runId = randomUUID();
    const stale = leaseOf(await runs.begin(id, runId));
    leaseOf(await runs.begin(id, runId));
    await expect(
      runs.appendStep(stale, stepDrafts(1), { metrics: { add: { llm_calls: 1, prompt_tokens: 50 } } }),
    ).rejects.toBeInstanceOf(RunLeaseLostError);
    expect(await kinds(id)).toEqual(["status:running"]);
    expect(await metricsOf(id)).toMatchObject({ llm_calls: 0, prompt_tokens: 0 });
  });

  it("writes nothing when a new attempt takes the conversation while the step waits for its row lock", async () => {
    const id = await conversation();
    const runId = randomUUID();
    const stale = leaseOf(await runs.begin(id, runId));
    // A newer attempt taking the lease, caught between its update and its commit (as `begin` is).
    const taker = new pg.Client({ connectionString: database.url });
    await taker.connect();
    try {
      await taker.query("begin");
      await taker.query("update conversations set run_attempt = run_attempt + 1 where id = $1", [id]);
      const step = runs.appendStep(stale, stepDrafts(1), { metrics: { add: { llm_calls: 1 } } });
      step.catch(() => undefined); // awaited below
      await waitFor(
        async () =>
          (
            await taker.query<{ n: string }>(
              "select count(*) as n from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock'",
            )
          ).rows[0]?.n === "1",
        { what: "the step to wait for the row lock", timeoutMs: 30_000 },
      );
      await taker.query("commit");
      await expect(step).rejects.toBeInstanceOf(RunLeaseLostError);
    } finally {
      await taker.end();
    }
    expect(await kinds(id)).toEqual(["status:running"]);
    expect(await metricsOf(id)).toMatchObject({ llm_calls: 0 });
  });

  it("refuses a step past maxEvents whole, with the limit as the reason", async () => {
    const id = await conversation();
    const lease = leaseOf(await runs.begin(id, randomUUID()));
    await expect(
      runs.appendStep(lease, stepDrafts(1), { maxEvents: 3, metrics: { add: { llm_calls: 1 } } }),
    ).rejects.toBeInstanceOf(EventLimitError);
    expect(await kinds(id)).toEqual(["status:running"]);
    expect(await metricsOf(id)).toMatchObject({ llm_calls: 0 });
    await runs.appendStep(lease, stepDrafts(1), { maxEvents: 4 });
    expect(await kinds(id)).toHaveLength(4);
  });

  it("feeds the webhook outbox with the step's events, and nothing of a refused step", async () => {
    const { conversationId: id, userId } = await createConversationFixture(database.db);
    const hook = await webhooksRepository(database.db).create({
      userId,
      url: "http://127.0.0.1:9/hook",
      events: ["conversation.event"],
      secretSealed: "sealed",
    });
    const runId = randomUUID();
    const stale = leaseOf(await runs.begin(id, runId));
    const lease = leaseOf(await runs.begin(id, runId));
    await expect(runs.appendStep(stale, stepDrafts(0))).rejects.toBeInstanceOf(RunLeaseLostError);
    const { events } = await runs.appendStep(lease, stepDrafts(1));
    const deliveries = await database.db
      .selectFrom("webhook_deliveries")
      .select(sql<string>`data->'event'->>'id'`.as("eventId"))
      .where("webhook_id", "=", hook.id)
      .execute();
    // The run's `running` change and the step's three events (none of the refused one's).
    expect(deliveries).toHaveLength(4);
    expect(deliveries.map((d) => d.eventId)).toEqual(expect.arrayContaining(events.map((e) => e.id)));
  });

  it("wakes live streams once per step, after its events are committed", async () => {
    const id = await conversation();
    const lease = leaseOf(await runs.begin(id, randomUUID()));
    const feed = createChangeFeed(database.url);
    try {
      await feed.ready;
      const seen: number[] = [];
      feed.onEvents(id, () => {
        // What a stream's catch-up read finds when woken: the whole step, never a part of it.
        void eventsRepository(database.db)
          .listAll(id)
          .then((all) => seen.push(all.length));
      });
      await runs.appendStep(lease, stepDrafts(1));
      await waitFor(() => seen.length >= 1, { what: "the first step's notification" });
      await runs.appendStep(lease, [...stepDrafts(2), message("step 2: one more")]);
      await waitFor(() => seen.length >= 2, { what: "the second step's notification" });
      expect(seen).toEqual([4, 8]);
    } finally {
      await feed.close();
    }
  });
});

describe("agent runs: a run is a row from its request until it ends", () => {
  const rowOf = (runId: string) =>
    database.db.selectFrom("agent_runs").selectAll().where("id", "=", runId).executeTakeFirstOrThrow();

  it("a request writes a queued row once; the run that takes it starts it; its end ends the row", async () => {
    const id = await conversation();
    const asked = await runs.request({ conversationId: id, runId: id, engineId: "engine-a" });
    expect(asked).toEqual({ conversationId: id, runId: id, engineId: "engine-a" });
    // Asked again (a start's READY written twice): still one row, as it was.
    await runs.request({ conversationId: id, runId: id, engineId: "engine-b" });
    expect(await rowOf(id)).toMatchObject({ status: "queued", engine_id: "engine-a", started_at: null, attempts: 0 });
    expect(await runs.isOpen(id)).toBe(true);
    expect((await runs.open(new Date(Date.now() + 1_000), { conversationId: id })).map((r) => r.runId)).toEqual([id]);

    const lease = leaseOf(await runs.begin(id, id));
    expect(await rowOf(id)).toMatchObject({ status: "running", attempts: 1, ended_at: null });
    expect((await rowOf(id)).started_at).not.toBeNull();
    await runs.end(lease, "finished", [message("done")]);
    expect(await rowOf(id)).toMatchObject({ status: "finished" });
    expect(await runs.isOpen(id)).toBe(false);
    expect(await runs.open(new Date(Date.now() + 1_000), { conversationId: id })).toEqual([]);
    // Its job delivered again: the run is over.
    expect(await runs.begin(id, id)).toEqual({ outcome: "ended" });
  });

  it("open lists the runs asked for before the cutoff, oldest first; skip ends only a run that never began", async () => {
    const id = await conversation();
    const first = await runs.request({ conversationId: id, engineId: null });
    const second = await runs.request({ conversationId: id, engineId: null });
    await database.db
      .updateTable("agent_runs")
      .set({ requested_at: new Date(Date.now() - 60_000) })
      .where("id", "=", first.runId)
      .execute();
    expect((await runs.open(new Date(Date.now() - 30_000), { conversationId: id })).map((r) => r.runId)).toEqual([
      first.runId,
    ]);
    expect((await runs.open(new Date(Date.now() + 1_000), { conversationId: id })).map((r) => r.runId)).toEqual([
      first.runId,
      second.runId,
    ]);

    leaseOf(await runs.begin(id, first.runId));
    await runs.skip(first.runId);
    expect(await rowOf(first.runId)).toMatchObject({ status: "running", ended_at: null });
    await runs.skip(second.runId);
    expect(await rowOf(second.runId)).toMatchObject({ status: "skipped" });
    expect((await rowOf(second.runId)).ended_at).not.toBeNull();
  });

  it("abandoning a run that holds no lock ends its row, and writes no event", async () => {
    const id = await conversation();
    const asked = await runs.request({ conversationId: id, engineId: null });
    expect(await runs.abandon(id, asked.runId, [])).toBe(false);
    expect(await rowOf(asked.runId)).toMatchObject({ status: "error" });
    expect(await kinds(id)).toEqual([]);
  });
});
