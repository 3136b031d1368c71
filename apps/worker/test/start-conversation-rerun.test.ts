import { createLogger, type StartTask } from "@tern/core";
import {
  agentRunsRepository,
  eventsRepository,
  sandboxesRepository,
  startTasksRepository,
  usersRepository,
} from "@tern/db";
import { createQueues, createRedis, type Queues } from "@tern/queue";
import { requestRun } from "@tern/services";
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
  it("writes the first events once, and its first run, asked for again, is one row", async () => {
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
    const second = await openStartedConversation(ctx, acquired, workspace, []);
    // And a third attempt opens it again: its run is still the one row.
    await openStartedConversation(ctx, acquired, workspace, []);

    expect(second.id).toBe(first.id);
    const events = await eventsRepository(database.db).listAll(first.id);
    expect(events.map((e) => e.kind)).toEqual(["SystemPromptEvent", "MessageEvent"]);
    // READY asks for the first run under the conversation's own id; a READY run again asks again.
    await requestRun(database.db, first.id, null, first.id);
    await requestRun(database.db, first.id, null, first.id);
    const runs = await agentRunsRepository(database.db).open(new Date(Date.now() + 60_000), {
      conversationId: first.id,
    });
    expect(runs.map((r) => ({ conversationId: r.conversationId, runId: r.runId, status: r.status }))).toEqual([
      { conversationId: first.id, runId: first.id, status: "queued" },
    ]);
  });
});
