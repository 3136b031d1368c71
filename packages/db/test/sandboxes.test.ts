import { openSessionApiKey } from "@tern/core";
import { createConversationFixture, createTestDatabase, type TestDatabase, testSecretBox } from "@tern/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type SandboxesRepository, sandboxesRepository } from "../src/repositories/sandboxes.ts";

let database: TestDatabase;
let sandboxes: SandboxesRepository;

beforeAll(async () => {
  database = await createTestDatabase();
  sandboxes = sandboxesRepository(database.db);
});

afterAll(async () => {
  await database?.drop();
});

describe("sandboxes", () => {
  it("upserts by name: a second call returns the first row, whatever it asks", async () => {
    const { taskId } = await createConversationFixture(database.db);
    const first = await sandboxes.upsert({ name: "tern-a", image: "img:1", startTaskId: taskId });
    expect(first).toMatchObject({
      name: "tern-a",
      image: "img:1",
      startTaskId: taskId,
      conversationId: null,
      ref: null,
      status: "STARTING",
    });
    const again = await sandboxes.upsert({ name: "tern-a", image: "img:2", status: "RUNNING" });
    expect(again).toEqual(first);
    const withId = await sandboxes.upsert({
      id: "00000000-0000-4000-8000-0000000000aa",
      name: "tern-b",
      image: "img:1",
    });
    expect(withId.id).toBe("00000000-0000-4000-8000-0000000000aa");
  });

  it("finds rows by id, task and name, and updates only what the patch names", async () => {
    const { taskId, conversationId } = await createConversationFixture(database.db);
    const row = await sandboxes.upsert({ name: "tern-c", image: "img", startTaskId: taskId });
    expect((await sandboxes.get(row.id))?.id).toBe(row.id);
    expect((await sandboxes.findByTask(taskId))?.id).toBe(row.id);
    expect((await sandboxes.findByName("tern-c"))?.id).toBe(row.id);
    expect(await sandboxes.findByName("tern-none")).toBeNull();
    expect(await sandboxes.get("00000000-0000-4000-8000-000000000000")).toBeNull();

    await sandboxes.update(row.id, { status: "RUNNING", ref: "abc123", conversationId });
    const running = await sandboxes.get(row.id);
    expect(running).toMatchObject({ status: "RUNNING", ref: "abc123", conversationId, startTaskId: taskId });
    expect(Date.parse(running!.updatedAt)).toBeGreaterThanOrEqual(Date.parse(row.updatedAt));
    await sandboxes.update(row.id, { status: "MISSING" });
    expect(await sandboxes.get(row.id)).toMatchObject({ status: "MISSING", ref: "abc123", conversationId });
  });

  it("keeps the owner: the start task's user, or the conversation's; lists a user's own, newest first", async () => {
    const mine = await createConversationFixture(database.db);
    const theirs = await createConversationFixture(database.db);
    const a = await sandboxes.upsert({ name: "tern-own-a", image: "img", startTaskId: mine.taskId });
    const b = await sandboxes.upsert({ name: "tern-own-b", image: "img", conversationId: mine.conversationId });
    const other = await sandboxes.upsert({ name: "tern-own-c", image: "img", startTaskId: theirs.taskId });
    expect([a.userId, b.userId, other.userId]).toEqual([mine.userId, mine.userId, theirs.userId]);
    const loose = await sandboxes.upsert({ name: "tern-own-d", image: "img" });
    expect(loose.userId).toBeNull();
    // A row that gets its owner later (a pool sandbox claimed by a task) gets its user too.
    await sandboxes.update(loose.id, { startTaskId: mine.taskId });
    expect((await sandboxes.get(loose.id))?.userId).toBe(mine.userId);

    const found = await sandboxes.findForUser(mine.userId, [a.id, other.id, b.id]);
    expect(found.map((s) => s.id).sort()).toEqual([a.id, b.id].sort());
    const sealed = found.find((s) => s.id === b.id)?.sealedSessionApiKey ?? null;
    expect(openSessionApiKey(testSecretBox(), mine.conversationId, sealed)).toBe(mine.sessionApiKey);
    expect(found.find((s) => s.id === a.id)?.sealedSessionApiKey).toBeNull();

    const first = await sandboxes.searchForUser(mine.userId, { limit: 2 });
    expect(first).toHaveLength(3);
    expect(first.map((s) => s.id)).toEqual([loose.id, b.id, a.id]);
    const last = first[1];
    const rest = await sandboxes.searchForUser(mine.userId, {
      limit: 2,
      after: { createdAt: last?.createdAt ?? "", id: last?.id ?? "" },
    });
    expect(rest.map((s) => s.id)).toEqual([a.id]);
  });

  it("runs commands on one sandbox one at a time under its row's lock", async () => {
    const { taskId } = await createConversationFixture(database.db);
    const row = await sandboxes.upsert({ name: "tern-lock", image: "img", startTaskId: taskId, status: "RUNNING" });
    const order: string[] = [];
    let releaseFirst: () => void = () => undefined;
    const firstHolds = new Promise<void>((r) => {
      releaseFirst = r;
    });
    let firstIn: () => void = () => undefined;
    const firstEntered = new Promise<void>((r) => {
      firstIn = r;
    });
    const first = sandboxes.withLock(row.id, async (seen, trx) => {
      firstIn();
      order.push(`first saw ${seen?.status}`);
      await firstHolds;
      await sandboxesRepository(trx).update(row.id, { status: "PAUSED" });
    });
    await firstEntered;
    const second = sandboxes.withLock(row.id, async (seen) => {
      order.push(`second saw ${seen?.status}`);
    });
    releaseFirst();
    await Promise.all([first, second]);
    // The second waited for the first's commit, and saw what it wrote.
    expect(order).toEqual(["first saw RUNNING", "second saw PAUSED"]);
    expect(await sandboxes.withLock("00000000-0000-4000-8000-000000000000", async (seen) => seen)).toBeNull();
  });
});
