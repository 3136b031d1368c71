import { ConflictError, NotFoundError, toHexId, UnavailableError } from "@tern/core";
import { agentRunsRepository } from "@tern/db";
import { createConversationFixture } from "@tern/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  deleteConversation,
  ownedConversation,
  ownedConversations,
  pauseConversation,
  runConversation,
  sendMessage,
} from "../src/index.ts";
import { createServiceWorld, downRedis, type ServiceWorld, withAdd } from "./world.ts";

let world: ServiceWorld;
beforeAll(async () => {
  world = await createServiceWorld();
});
afterAll(async () => world?.close());

const text = (t: string) => [{ type: "text" as const, text: t }];
const messagesOf = async (conversationId: string) =>
  (
    await world.database.db
      .selectFrom("events")
      .select("payload")
      .where("conversation_id", "=", conversationId)
      .where("kind", "=", "MessageEvent")
      .execute()
  ).map((e) => JSON.stringify(e.payload));
const runJobs = async () => (await world.deps.queues.agentRun.getJobs(["waiting"])).map((j) => j.data);

describe("ownedConversation", () => {
  it("finds the caller's by 32 hex or uuid; another user's, unknown and malformed ids are NotFoundError", async () => {
    const mine = await createConversationFixture(world.database.db);
    const theirs = await createConversationFixture(world.database.db);
    const caller = { userId: mine.userId };
    expect((await ownedConversation(world.deps, caller, toHexId(mine.conversationId))).id).toBe(mine.conversationId);
    expect((await ownedConversation(world.deps, caller, mine.conversationId)).id).toBe(mine.conversationId);
    for (const id of [theirs.conversationId, "0".repeat(32), "nope"]) {
      await expect(ownedConversation(world.deps, caller, id)).rejects.toThrow(
        new NotFoundError("No such conversation"),
      );
    }
  });

  it("lets a session caller reach its own conversation only; batches answer in order, null where not theirs", async () => {
    const a = await createConversationFixture(world.database.db);
    const b = await createConversationFixture(world.database.db, { userId: a.userId });
    const session = { userId: a.userId, conversationId: a.conversationId };
    expect((await ownedConversation(world.deps, session, a.conversationId)).id).toBe(a.conversationId);
    await expect(ownedConversation(world.deps, session, b.conversationId)).rejects.toBeInstanceOf(NotFoundError);
    const batch = await ownedConversations(world.deps, { userId: a.userId }, [b.conversationId, "x", a.conversationId]);
    expect(batch.map((c) => c?.id ?? null)).toEqual([b.conversationId, null, a.conversationId]);
  });
});

describe("sendMessage", () => {
  it("records the skills a follow-up triggers (whole words), each only the first time", async () => {
    const { conversationId, userId } = await createConversationFixture(world.database.db);
    await world.database.db
      .updateTable("conversations")
      .set({
        skills: JSON.stringify([
          { name: "deployer", triggers: ["deploy"], content: "make deploy", source: ".openhands/skills/d.md" },
          { name: "release", triggers: ["/release"], content: "tag it", source: ".openhands/skills/r.md" },
          { name: "server", triggers: [], content: "rule", source: "server/AGENTS.md", paths: ["server/**"] },
        ]),
      })
      .where("id", "=", conversationId)
      .execute();
    const say = (t: string) => sendMessage(world.deps, { userId }, conversationId, { content: text(t), run: false });
    await say("Please DEPLOY it");
    await say("deploy again, then /release");
    await say("redeployment of server/** later");
    const activated = (await messagesOf(conversationId)).map((p) => JSON.parse(p).activated_skills ?? null);
    expect(activated).toEqual([["deployer"], ["release"], null]);
  });

  it("commits the message before the run is asked for, so the run always sees it", async () => {
    const c = await world.conversationWithSandbox();
    let seenAtAdd: string[] = [];
    const { result, calls } = await withAdd(
      world.deps.queues.agentRun,
      (add) =>
        async (...args) => {
          seenAtAdd = await messagesOf(c.conversationId);
          return add(...args);
        },
      () => sendMessage(world.deps, c, c.conversationId, { content: text("Fix it"), run: true }),
    );
    expect(result.status).toBe("fulfilled");
    expect(calls).toBe(1);
    expect(seenAtAdd).toHaveLength(1);
    expect(seenAtAdd[0]).toContain("Fix it");
    expect((await runJobs()).map((d) => d.conversationId)).toContain(c.conversationId);
  });

  it("without run only stores the message, even while the queue is down", async () => {
    const c = await world.conversationWithSandbox();
    await sendMessage({ ...world.deps, redis: downRedis }, c, c.conversationId, { content: text("note"), run: false });
    expect(await messagesOf(c.conversationId)).toHaveLength(1);
  });

  it("stores nothing while the queue is down and a run is wanted", async () => {
    const c = await world.conversationWithSandbox();
    const err = await sendMessage({ ...world.deps, redis: downRedis }, c, c.conversationId, {
      content: text("lost?"),
      run: true,
    }).catch((e) => e);
    expect(err).toBeInstanceOf(UnavailableError);
    expect(err.message).toBe("The job queue is unreachable; try again shortly");
    expect(await messagesOf(c.conversationId)).toEqual([]);
  });

  it("a run whose job cannot be added after the commit is still owed: the message and a queued run are stored", async () => {
    const c = await world.conversationWithSandbox();
    const { result } = await withAdd(
      world.deps.queues.agentRun,
      () => () => Promise.reject(new Error("connection lost")),
      () => sendMessage(world.deps, c, c.conversationId, { content: text("kept"), run: true }),
    );
    // Not the caller's failure: the janitor's sweep adds the job of a run it finds without one.
    expect(result.status).toBe("fulfilled");
    expect(await messagesOf(c.conversationId)).toHaveLength(1);
    const runs = await world.database.db
      .selectFrom("agent_runs")
      .select(["status", "ended_at"])
      .where("conversation_id", "=", c.conversationId)
      .execute();
    expect(runs).toEqual([{ status: "queued", ended_at: null }]);
  });

  it("refuses a run once the sandbox is gone (ConflictError), storing nothing", async () => {
    const c = await createConversationFixture(world.database.db);
    await expect(
      sendMessage(world.deps, c, c.conversationId, { content: text("still there?"), run: true }),
    ).rejects.toThrow(new ConflictError("The conversation's sandbox was removed; the agent cannot run any more"));
    expect(await messagesOf(c.conversationId)).toEqual([]);
  });
});

describe("runConversation", () => {
  it("asks for a run; ConflictError while that run is going on, or once the sandbox is gone", async () => {
    const c = await world.conversationWithSandbox();
    await runConversation(world.deps, c, c.conversationId);
    const [job] = (await world.deps.queues.agentRun.getJobs(["waiting"])).filter(
      (j) => j.data.conversationId === c.conversationId,
    );
    expect(job).toBeDefined();
    const begun = await agentRunsRepository(world.database.db).begin(c.conversationId, job?.data.runId);
    expect(begun.outcome).toBe("started");
    await expect(runConversation(world.deps, c, c.conversationId)).rejects.toThrow(
      new ConflictError("The agent is already running in this conversation"),
    );
    const gone = await createConversationFixture(world.database.db);
    await expect(runConversation(world.deps, gone, gone.conversationId)).rejects.toBeInstanceOf(ConflictError);
  });

  it("fails fast while the queue is down", async () => {
    const c = await world.conversationWithSandbox();
    await expect(runConversation({ ...world.deps, redis: downRedis }, c, c.conversationId)).rejects.toBeInstanceOf(
      UnavailableError,
    );
  });
});

describe("pauseConversation and deleteConversation", () => {
  it("pause with no run going on makes the conversation paused at once", async () => {
    const c = await world.conversationWithSandbox();
    await pauseConversation(world.deps, c, c.conversationId);
    const row = await world.database.db
      .selectFrom("conversations")
      .select("execution_status")
      .where("id", "=", c.conversationId)
      .executeTakeFirst();
    expect(row?.execution_status).toBe("paused");
  });

  it("delete asks for the sandbox's removal, and needs no job once it is gone", async () => {
    const c = await world.conversationWithSandbox();
    const removals = async () =>
      (await world.deps.queues.sandbox.getJobs(["waiting"])).filter((j) => j.data.conversationId === c.conversationId);
    await deleteConversation(world.deps, c, c.conversationId);
    expect(await removals()).toHaveLength(1);
    const gone = await createConversationFixture(world.database.db);
    const { calls } = await withAdd(
      world.deps.queues.sandbox,
      (add) => add,
      () => deleteConversation({ ...world.deps, redis: downRedis }, gone, gone.conversationId),
    );
    expect(calls).toBe(0);
    await expect(deleteConversation(world.deps, { userId: c.userId }, gone.conversationId)).rejects.toBeInstanceOf(
      NotFoundError,
    );
  });
});
