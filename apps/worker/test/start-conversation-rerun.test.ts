import { createLogger, type StartTask } from "@tern/core";
import { eventsRepository, sandboxesRepository, startTasksRepository, usersRepository } from "@tern/db";
import { createQueues, createRedis, type Queues } from "@tern/queue";
import {
  createRedisPrefix,
  createTestDatabase,
  deleteRedisPrefix,
  type TestDatabase,
  testRedisUrl,
  testSecretBox,
} from "@tern/testing";
import type { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadWorkerConfig } from "../src/config.ts";
import type { WorkerDeps } from "../src/deps.ts";
import type { StartContext } from "../src/pipeline/context.ts";
import { openStartedConversation } from "../src/pipeline/open-conversation.ts";

let database: TestDatabase;
let redis: Redis;
let queues: Queues;
const prefix = createRedisPrefix();

beforeAll(async () => {
  database = await createTestDatabase();
  redis = createRedis(testRedisUrl(), "worker");
  queues = createQueues(redis, prefix);
});

afterAll(async () => {
  await queues.close();
  redis.disconnect();
  await database.drop();
  await deleteRedisPrefix(prefix);
});

describe("STARTING_CONVERSATION run again (its worker died after writing the first events)", () => {
  it("writes the first events once, and the run that was never asked for is asked for once", async () => {
    const user = await usersRepository(database.db).create();
    const task: StartTask = await startTasksRepository(database.db).create(user.id, {
      initial_message: { role: "user", content: [{ type: "text", text: "hi" }], run: true },
    });
    const sandbox = await sandboxesRepository(database.db).upsert({
      name: `tern-test-${task.id}`,
      image: "tern-sandbox:latest",
      startTaskId: task.id,
      status: "RUNNING",
    });
    const deps = {
      config: loadWorkerConfig({}),
      db: database.db,
      redis,
      queues,
      logger: createLogger("test", "silent"),
      secretBox: testSecretBox(),
    } as unknown as WorkerDeps;
    const ctx: StartContext = { deps, task, attempt: 0, log: deps.logger };
    const acquired = { sandboxId: sandbox.id, ref: "unused", name: sandbox.name };
    const workspace = { dir: "/workspace/project", repository: null };

    const first = await openStartedConversation(ctx, acquired, workspace, []);
    // The first attempt died between writing the events and asking for the run: no job exists.
    await queues.agentRun.obliterate({ force: true });
    const second = await openStartedConversation(ctx, acquired, workspace, []);
    // And a third attempt asks again, which BullMQ answers with the same one job.
    await openStartedConversation(ctx, acquired, workspace, []);

    expect(second.id).toBe(first.id);
    const events = await eventsRepository(database.db).listAll(first.id);
    expect(events.map((e) => e.kind)).toEqual(["SystemPromptEvent", "MessageEvent"]);
    const runs = await queues.agentRun.getJobs(["waiting", "active", "delayed", "completed", "failed"]);
    expect(runs.map((j) => j.data)).toEqual([{ conversationId: first.id, runId: first.id }]);
  });
});
