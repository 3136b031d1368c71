import { createLogger, newId } from "@tern/core";
import { usersRepository, warmSandboxesRepository } from "@tern/db";
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
import { startConversation } from "./start.ts";

/**
 * The API's warm claim against Postgres alone: the rows stand for warm sandboxes (no
 * engine is asked; the API never talks to one), and no worker consumes this prefix's queues.
 */
let database: TestDatabase;
let redis: Redis;
let queues: Queues;
let prefix: string;
const secretBox = testSecretBox();
const logger = createLogger("warm-start-test", "silent");
const SPEC = "tern-sandbox:warm-test";

const deps = () => ({ db: database.db, queues, redis, logger, secretBox, warmSpec: SPEC });

const addRows = async (n: number): Promise<string[]> => {
  const ids: string[] = [];
  for (let i = 0; i < n; i++) {
    const id = newId();
    ids.push(id);
    await warmSandboxesRepository(database.db).add({
      id,
      name: `tern-pool-test-${id}`,
      ref: `ref-${id}`,
      engineId: "engine-a",
      image: SPEC,
      spec: SPEC,
      ownerWorker: "w1",
      workspaceDir: "/workspace/project",
      systemPrompt: { text: "You are a test agent.", tools: [] },
      llmModel: "test-model",
    });
  }
  return ids;
};

beforeAll(async () => {
  database = await createTestDatabase();
  prefix = createRedisPrefix();
  redis = createRedis(testRedisUrl(), "producer");
  await new Promise<void>((r) => (redis.status === "ready" ? r() : redis.once("ready", () => r())));
  queues = createQueues(redis, prefix);
});

afterAll(async () => {
  await queues?.close();
  redis?.disconnect();
  await deleteRedisPrefix(prefix);
  await database?.drop();
});

describe("a start without a repository claims a warm row in its own transaction", () => {
  it("answers READY with the conversation, its sandbox, its first events, its stage history and its first run", async () => {
    const user = await usersRepository(database.db).create();
    const [rowId] = await addRows(1);
    const task = await startConversation(deps(), user.id, {
      initial_message: { role: "user", content: [{ type: "text", text: "hello from a warm start" }] },
    });
    expect(task.status).toBe("READY");
    expect(task.appConversationId).not.toBeNull();
    expect(task.sandboxId).toBe(rowId);

    const db = database.db;
    const row = await db.selectFrom("start_tasks").selectAll().where("id", "=", task.id).executeTakeFirstOrThrow();
    expect(row.stage_history.map((h) => h.status)).toEqual([
      "WORKING",
      "WAITING_FOR_SANDBOX",
      "PREPARING_REPOSITORY",
      "RUNNING_SETUP_SCRIPT",
      "SETTING_UP_GIT_HOOKS",
      "SETTING_UP_SKILLS",
      "STARTING_CONVERSATION",
      "READY",
    ]);
    const times = row.stage_history.map((h) => Date.parse(h.at));
    expect(times.every((t) => Number.isFinite(t))).toBe(true);
    expect([...times].sort((a, b) => a - b)).toEqual(times);

    const conversation = await db
      .selectFrom("conversations")
      .selectAll()
      .where("id", "=", task.appConversationId as string)
      .executeTakeFirstOrThrow();
    expect(conversation.sandbox_id).toBe(rowId);
    expect(conversation.llm_model).toBe("test-model");
    expect(conversation.workspace_dir).toBe("/workspace/project");

    const sandbox = await db
      .selectFrom("sandboxes")
      .selectAll()
      .where("id", "=", rowId as string)
      .executeTakeFirstOrThrow();
    expect(sandbox).toMatchObject({
      status: "RUNNING",
      ref: `ref-${rowId}`,
      name: `tern-pool-test-${rowId}`,
      conversation_id: conversation.id,
      start_task_id: task.id,
      user_id: user.id,
      engine_id: "engine-a",
    });

    const events = await db
      .selectFrom("events")
      .select(["kind", "source"])
      .where("conversation_id", "=", conversation.id)
      .orderBy("seq")
      .execute();
    expect(events).toEqual([
      { kind: "SystemPromptEvent", source: "agent" },
      { kind: "MessageEvent", source: "user" },
    ]);

    // The run: a queued row committed with the claim, its job then added to the row's engine's queue.
    const runs = await db.selectFrom("agent_runs").selectAll().where("conversation_id", "=", conversation.id).execute();
    expect(runs).toMatchObject([{ id: conversation.id, status: "queued", engine_id: "engine-a", ended_at: null }]);
    const deadline = Date.now() + 5_000;
    let enqueued = false;
    while (!enqueued && Date.now() < deadline) {
      const jobs = await queues.forEngine("engine-a").agentRun.getJobs(["waiting", "delayed", "prioritized"]);
      enqueued = jobs.some((j) => j.data.conversationId === conversation.id && j.data.runId === conversation.id);
      if (!enqueued) await new Promise((r) => setTimeout(r, 20));
    }
    expect(enqueued).toBe(true);

    // The row is the conversation's now: claimed, never handed out again.
    const warm = await db
      .selectFrom("warm_sandboxes")
      .selectAll()
      .where("id", "=", rowId as string)
      .executeTakeFirstOrThrow();
    expect(warm.claimed_at).not.toBeNull();
    expect(warm.conversation_id).toBe(conversation.id);
  });

  it("concurrent claims never share a row; the starts past the rows go to the queue as before", async () => {
    const user = await usersRepository(database.db).create();
    const ids = await addRows(4);
    const starts = await Promise.all(
      Array.from({ length: 10 }, (_, i) =>
        startConversation(deps(), user.id, {
          initial_message: { role: "user", content: [{ type: "text", text: `concurrent ${i}` }] },
        }),
      ),
    );
    const ready = starts.filter((t) => t.status === "READY");
    const queued = starts.filter((t) => t.status === "WORKING");
    expect(ready.length).toBe(4);
    expect(queued.length).toBe(6);
    expect(new Set(ready.map((t) => t.sandboxId))).toEqual(new Set(ids));
    expect(new Set(ready.map((t) => t.appConversationId)).size).toBe(4);
    const db = database.db;
    const rows = await db.selectFrom("warm_sandboxes").selectAll().where("id", "in", ids).execute();
    for (const r of rows) {
      const owner = ready.find((t) => t.sandboxId === r.id);
      expect(r.conversation_id).toBe(owner?.appConversationId);
    }
    const sandboxes = await db
      .selectFrom("sandboxes")
      .select(["id", "conversation_id"])
      .where("id", "in", ids)
      .execute();
    expect(new Set(sandboxes.map((s) => s.conversation_id)).size).toBe(4);
    // The queue path, unchanged: each a WORKING task with its conversation.start job, no sandbox.
    for (const t of queued) {
      expect(t.sandboxId).toBeNull();
      expect(await queues.start.getJob(t.id)).toBeTruthy();
    }
  });

  it("a start with a repository goes to the queue even with rows free", async () => {
    const user = await usersRepository(database.db).create();
    const [id] = await addRows(1);
    const task = await startConversation(deps(), user.id, { selected_repository: "octo/hello" });
    expect(task.status).toBe("WORKING");
    expect(await queues.start.getJob(task.id)).toBeTruthy();
    const row = await database.db
      .selectFrom("warm_sandboxes")
      .selectAll()
      .where("id", "=", id as string)
      .executeTakeFirstOrThrow();
    expect(row.claimed_at).toBeNull();
    // Taken by the next start without one.
    const next = await startConversation(deps(), user.id, {});
    expect(next.status).toBe("READY");
    expect(next.sandboxId).toBe(id);
  });

  it("takes no row whose owner stopped checking it, nor an unhealthy one", async () => {
    const user = await usersRepository(database.db).create();
    const [stale, sick] = await addRows(2);
    await database.db
      .updateTable("warm_sandboxes")
      .set({ checked_at: new Date(Date.now() - 3_600_000) })
      .where("id", "=", stale as string)
      .execute();
    await database.db
      .updateTable("warm_sandboxes")
      .set({ healthy: false })
      .where("id", "=", sick as string)
      .execute();
    const task = await startConversation(deps(), user.id, {});
    expect(task.status).toBe("WORKING");
  });
});
