import { createTestDatabase, type TestDatabase } from "@tern/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type StartTasksRepository, startTasksRepository } from "../src/repositories/start-tasks.ts";
import { usersRepository } from "../src/repositories/users.ts";

let database: TestDatabase;
let tasks: StartTasksRepository;
let userId: string;

beforeAll(async () => {
  database = await createTestDatabase();
  tasks = startTasksRepository(database.db);
  userId = (await usersRepository(database.db).create()).id;
});

afterAll(async () => {
  await database?.drop();
});

/** A task that attempt 1 worked on until attempt 2 took it over (a worker died, BullMQ retried). */
const takenOver = async () => {
  const task = await tasks.create(userId, { title: "t" });
  expect(await tasks.claim(task.id, 1)).toMatchObject({ attempt: 1 });
  expect(await tasks.enterStage(task.id, 1, "WAITING_FOR_SANDBOX")).toBe(true);
  expect(await tasks.claim(task.id, 2)).toMatchObject({ attempt: 2, status: "WAITING_FOR_SANDBOX" });
  return task.id;
};

describe("start tasks: create and read", () => {
  it("creates a task WORKING at attempt 0 with the request as given, and reads it back", async () => {
    const created = await tasks.create(userId, { title: "hello", selected_branch: "main" });
    expect(created).toMatchObject({ userId, status: "WORKING", attempt: 0, detail: null, appConversationId: null });
    expect(created.request).toEqual({ title: "hello", selected_branch: "main" });
    expect(await tasks.get(created.id)).toEqual(created);
    expect(await tasks.get("00000000-0000-4000-8000-000000000000")).toBeNull();
  });

  it("finds only the caller's tasks, and pages them newest first by (created_at, id)", async () => {
    const owner = (await usersRepository(database.db).create()).id;
    const other = (await usersRepository(database.db).create()).id;
    const mine = [];
    for (let i = 0; i < 5; i++) mine.push(await tasks.create(owner, { title: `t${i}` }));
    const foreign = await tasks.create(other, {});
    const found = await tasks.findForUser(owner, [mine[0]!.id, foreign.id, mine[3]!.id]);
    expect(found.map((t) => t.id).sort()).toEqual([mine[0]!.id, mine[3]!.id].sort());
    expect(await tasks.findForUser(owner, [])).toEqual([]);

    const first = await tasks.searchForUser(owner, { limit: 2 });
    expect(first).toHaveLength(3); // limit + 1: more follow
    const newestFirst = [...mine].reverse().map((t) => t.id);
    expect(first.slice(0, 2).map((t) => t.id)).toEqual(newestFirst.slice(0, 2));
    const last = first[1]!;
    const rest = await tasks.searchForUser(owner, { limit: 10, after: { key: last.createdAt, id: last.id } });
    expect(rest.map((t) => t.id)).toEqual(newestFirst.slice(2));
  });

  it("lists tasks in flight, least recently progressed first, and deletes", async () => {
    const a = await tasks.create(userId, {});
    const b = await tasks.create(userId, {});
    await tasks.markError(b.id, "WORKING: gone");
    const inFlight = (await tasks.listInFlight()).map((t) => t.id);
    expect(inFlight).toContain(a.id);
    expect(inFlight).not.toContain(b.id);
    expect(
      (await tasks.listInFlight({ updatedBefore: new Date(Date.parse(a.updatedAt) - 1) })).map((t) => t.id),
    ).not.toContain(a.id);
    await tasks.delete(a.id);
    expect(await tasks.get(a.id)).toBeNull();
  });
});

describe("start tasks: the fencing token", () => {
  it("claim: a newer attempt takes the task over; an older one is refused", async () => {
    const id = await takenOver();
    expect(await tasks.claim(id, 1)).toBeNull();
    // The same attempt again (a redelivered job of that attempt) still owns it.
    expect(await tasks.claim(id, 2)).toMatchObject({ attempt: 2 });
  });

  it("refuses every stage write of a stale attempt, and lands the owner's", async () => {
    const id = await takenOver();
    expect(await tasks.enterStage(id, 1, "PREPARING_REPOSITORY", { stage: "WAITING_FOR_SANDBOX", ms: 5 })).toBe(false);
    expect(await tasks.setSandbox(id, 1, "00000000-0000-4000-8000-000000000001")).toBe(false);
    expect(await tasks.setSetupOutput(id, 1, "stale output")).toBe(false);
    expect(await tasks.markReady(id, 1, "00000000-0000-4000-8000-000000000002")).toBe(false);
    expect(await tasks.markError(id, "RUNNING_SETUP_SCRIPT: stale", 1)).toBe(false);
    const untouched = await tasks.get(id);
    expect(untouched).toMatchObject({
      status: "WAITING_FOR_SANDBOX",
      attempt: 2,
      sandboxId: null,
      detail: null,
      appConversationId: null,
      stageDurations: {},
    });
    expect(await tasks.getSetupOutput(id)).toBeNull();

    // The owner's writes land.
    expect(await tasks.enterStage(id, 2, "RUNNING_SETUP_SCRIPT", { stage: "WAITING_FOR_SANDBOX", ms: 7 })).toBe(true);
    expect(await tasks.setSetupOutput(id, 2, "setup ok\n")).toBe(true);
    expect(await tasks.getSetupOutput(id)).toBe("setup ok\n");
  });

  it("refuses a stale attempt's ERROR and READY, and every write once the task is finished", async () => {
    const id = await takenOver();
    const sandboxId = "00000000-0000-4000-8000-000000000003";
    const conversationId = "00000000-0000-4000-8000-000000000004";
    expect(await tasks.setSandbox(id, 2, sandboxId)).toBe(true);
    expect(await tasks.markReady(id, 2, conversationId, { stage: "STARTING_CONVERSATION", ms: 9 })).toBe(true);
    const ready = await tasks.get(id);
    expect(ready).toMatchObject({ status: "READY", sandboxId, appConversationId: conversationId });
    expect(ready?.stageDurations).toMatchObject({ STARTING_CONVERSATION: 9 });
    // Finished: not even the owner, nor the janitor (no attempt), changes it any more.
    expect(await tasks.enterStage(id, 2, "RUNNING_SETUP_SCRIPT")).toBe(false);
    expect(await tasks.markError(id, "late", 2)).toBe(false);
    expect(await tasks.markError(id, "late")).toBe(false);
    expect(await tasks.claim(id, 3)).toBeNull();
    expect((await tasks.get(id))?.status).toBe("READY");
  });

  it("lets the janitor end an unfinished task in ERROR without an attempt", async () => {
    const id = await takenOver();
    expect(await tasks.markError(id, "WAITING_FOR_SANDBOX: no progress")).toBe(true);
    expect(await tasks.get(id)).toMatchObject({ status: "ERROR", detail: "WAITING_FOR_SANDBOX: no progress" });
  });
});
