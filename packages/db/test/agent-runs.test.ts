import { randomUUID } from "node:crypto";
import { newEvent } from "@tern/core";
import { createConversationFixture, createTestDatabase, type TestDatabase } from "@tern/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  type AgentRunsRepository,
  agentRunsRepository,
  type RunLease,
  RunLeaseLostError,
} from "../src/repositories/agent-runs.ts";
import { conversationsRepository } from "../src/repositories/conversations.ts";
import { eventsRepository } from "../src/repositories/events.ts";

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
