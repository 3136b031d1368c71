import { UnavailableError } from "@tern/core";
import { usersRepository } from "@tern/db";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { requeueStartTask, startConversation } from "../src/index.ts";
import { createServiceWorld, downRedis, type ServiceWorld, withAdd } from "./world.ts";

let world: ServiceWorld;
beforeAll(async () => {
  world = await createServiceWorld();
});
afterAll(async () => world?.close());

const newUser = async () => (await usersRepository(world.database.db).create()).id;
const tasksOf = (userId: string) =>
  world.database.db.selectFrom("start_tasks").select(["id", "status"]).where("user_id", "=", userId).execute();

describe("startConversation", () => {
  it("writes a WORKING start task and its conversation.start job, under the task id", async () => {
    const userId = await newUser();
    const task = await startConversation(world.deps, userId, { title: "t" });
    expect(task).toMatchObject({ userId, status: "WORKING", request: { title: "t" } });
    expect(await tasksOf(userId)).toEqual([{ id: task.id, status: "WORKING" }]);
    const job = await world.deps.queues.start.getJob(task.id);
    expect(job?.name).toBe("conversation.start");
    expect(job?.data).toEqual({ taskId: task.id });
  });

  it("fails fast while the queue's connection is down: nothing written, no add tried", async () => {
    const userId = await newUser();
    const { result, calls } = await withAdd(
      world.deps.queues.start,
      (add) => add,
      () => startConversation({ ...world.deps, redis: downRedis }, userId, {}),
    );
    expect(result.status === "rejected" && result.reason).toBeInstanceOf(UnavailableError);
    expect(result.status === "rejected" && result.reason.message).toBe(
      "The job queue is unreachable; try again shortly",
    );
    expect(calls).toBe(0);
    expect(await tasksOf(userId)).toEqual([]);
  });

  it("rolls the task back when the add fails, so no task waits without a job", async () => {
    const userId = await newUser();
    const { result, calls } = await withAdd(
      world.deps.queues.start,
      () => () => Promise.reject(new Error("READONLY You can't write against a read only replica.")),
      () => startConversation(world.deps, userId, {}),
    );
    expect(calls).toBe(1);
    expect(result.status === "rejected" && result.reason).toBeInstanceOf(UnavailableError);
    expect(await tasksOf(userId)).toEqual([]);
  });

  it("gives the add up after the time limit, and rolls the task back", async () => {
    const userId = await newUser();
    const { result } = await withAdd(
      world.deps.queues.start,
      () => () => new Promise(() => undefined),
      () => startConversation(world.deps, userId, {}),
    );
    expect(result.status === "rejected" && result.reason).toBeInstanceOf(UnavailableError);
    expect(await tasksOf(userId)).toEqual([]);
  });
});

describe("requeueStartTask", () => {
  it("adds a new job whose attempts count on from the task's", async () => {
    const userId = await newUser();
    const task = await startConversation(world.deps, userId, {});
    await (await world.deps.queues.start.getJob(task.id))?.remove();
    await requeueStartTask(world.deps, { id: task.id, attempt: 3 });
    expect((await world.deps.queues.start.getJob(task.id))?.data).toEqual({ taskId: task.id, attemptBase: 3 });
  });
});
