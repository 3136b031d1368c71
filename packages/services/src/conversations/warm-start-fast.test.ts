import { createLogger, newId, QuotaExceededError, type SystemPromptTool } from "@tern/core";
import {
  createDb,
  type DbHandle,
  sandboxesRepository,
  startTaskSecretsRepository,
  startTasksRepository,
  userSettingsRepository,
  usersRepository,
  warmSandboxesRepository,
} from "@tern/db";
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
import { sql } from "kysely";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openConversation } from "./open.ts";
import { requestRun } from "./runs.ts";
import { startConversation } from "./start.ts";

/**
 * The warm claim in one round trip (tern_warm_claim): the conversation opened as the worker's
 * pipeline opens one (tern_open_conversation), the quotas and the webhook outbox kept, and the
 * statements the API sends for it counted on the wire.
 */
let database: TestDatabase;
/** The same database through a pool whose every client counts what it is sent. */
let counted: DbHandle;
const sent: string[] = [];
let redis: Redis;
let queues: Queues;
let prefix: string;
const secretBox = testSecretBox();
const logger = createLogger("warm-start-fast-test", "silent");
const SPEC = "tern-sandbox:warm-fast-test";

const deps = (over: Record<string, unknown> = {}) => ({
  db: database.db,
  queues,
  redis,
  logger,
  secretBox,
  warmSpec: SPEC,
  ...over,
});

const addRows = async (n: number, prompt = "You are a test agent."): Promise<string[]> => {
  const ids: string[] = [];
  for (let i = 0; i < n; i++) {
    const id = newId();
    ids.push(id);
    await warmSandboxesRepository(database.db).add({
      id,
      name: `tern-pool-fast-${id}`,
      ref: `ref-${id}`,
      engineId: "engine-a",
      image: SPEC,
      spec: SPEC,
      ownerWorker: "w1",
      workspaceDir: "/workspace/project",
      systemPrompt: {
        text: prompt,
        tools: [{ type: "function", function: { name: "t", description: "a tool", parameters: {} } }],
      },
      llmModel: "row-model",
    });
  }
  return ids;
};

const unclaimed = async () =>
  (
    await database.db
      .selectFrom("warm_sandboxes")
      .select("id")
      .where("claimed_at", "is", null)
      .where("spec", "=", SPEC)
      .execute()
  ).length;

beforeAll(async () => {
  database = await createTestDatabase();
  counted = createDb(database.url);
  counted.pool.on("connect", (client) => {
    const query = client.query.bind(client) as (...a: unknown[]) => unknown;
    (client as unknown as { query: (...a: unknown[]) => unknown }).query = (...a: unknown[]) => {
      const q = a[0] as string | { text?: string };
      sent.push(typeof q === "string" ? q : (q.text ?? ""));
      return query(...a);
    };
  });
  prefix = createRedisPrefix();
  redis = createRedis(testRedisUrl(), "producer");
  await new Promise<void>((r) => (redis.status === "ready" ? r() : redis.once("ready", () => r())));
  queues = createQueues(redis, prefix);
});

afterAll(async () => {
  await counted?.close();
  await queues?.close();
  redis?.disconnect();
  await deleteRedisPrefix(prefix);
  await database?.drop();
});

describe("the warm claim in one round trip", () => {
  it("sends Postgres one statement for a start without a message, and no BEGIN/COMMIT", async () => {
    const user = await usersRepository(database.db).create();
    await addRows(1);
    sent.length = 0;
    const task = await startConversation(
      deps({ db: counted.db, limits: { maxStartsInFlightPerUser: 5, maxSandboxesPerUser: 5 } }),
      user.id,
      {},
    );
    expect(task.status).toBe("READY");
    expect(sent).toHaveLength(1);
    expect(sent[0]).toContain("tern_warm_claim");
  });

  it("a start with a message: the user's secrets read to mask it, then the one claim; the run's job after the answer", async () => {
    const user = await usersRepository(database.db).create();
    await addRows(1);
    sent.length = 0;
    const task = await startConversation(deps({ db: counted.db }), user.id, {
      initial_message: { role: "user", content: [{ type: "text", text: "hi" }] },
    });
    expect(task.status).toBe("READY");
    const claimAt = sent.findIndex((q) => q.includes("tern_warm_claim"));
    expect(claimAt).toBeGreaterThanOrEqual(0);
    // Before the answer: the claim and what precedes it, none of them a transaction of its own.
    expect(sent.slice(0, claimAt).some((q) => /^\s*begin/i.test(q))).toBe(false);
    expect(claimAt).toBeLessThanOrEqual(1);
  });

  it("writes what the transaction path writes: model from the user's settings, prompt suffixes, durations", async () => {
    const user = await usersRepository(database.db).create();
    await userSettingsRepository(database.db).upsert(user.id, { llmModel: "settings-model" });
    const [rowId] = await addRows(1, "Base prompt.");
    const task = await startConversation(deps(), user.id, {
      agent_type: "plan",
      system_message_suffix: "Suffix here.",
      title: "titled",
      initial_message: { role: "user", content: [{ type: "text", text: "plan it" }] },
    });
    expect(task.status).toBe("READY");
    expect(task.sandboxId).toBe(rowId);
    const db = database.db;
    const conversation = await db
      .selectFrom("conversations")
      .selectAll()
      .where("id", "=", task.appConversationId as string)
      .executeTakeFirstOrThrow();
    expect(conversation).toMatchObject({
      llm_model: "settings-model",
      title: "titled",
      agent_type: "plan",
      start_task_id: task.id,
      sandbox_id: rowId,
      last_seq: 2,
    });
    expect(conversation.session_api_key_hash).toBeTruthy();
    const events = await db
      .selectFrom("events")
      .selectAll()
      .where("conversation_id", "=", conversation.id)
      .orderBy("seq")
      .execute();
    expect(events.map((e) => [e.seq, e.kind, e.source])).toEqual([
      [1, "SystemPromptEvent", "agent"],
      [2, "MessageEvent", "user"],
    ]);
    const system = events[0]?.payload as { system_prompt: { text: string }; tools: unknown[] } | undefined;
    const prompt = system?.system_prompt.text ?? "";
    expect(prompt.startsWith("Base prompt.\n\n")).toBe(true);
    expect(prompt.endsWith("\n\nSuffix here.")).toBe(true);
    expect(prompt).toContain("planning mode");
    expect(system?.tools).toHaveLength(1);
    expect(events[1]?.payload).toEqual({
      llm_message: { role: "user", content: [{ type: "text", text: "plan it" }] },
      activated_skills: [],
    });
    expect(conversation.last_event_at).toBe(events[1]?.timestamp);
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
    expect(Object.keys(row.stage_durations).sort()).toEqual(
      [
        "WAITING_FOR_SANDBOX",
        "PREPARING_REPOSITORY",
        "RUNNING_SETUP_SCRIPT",
        "SETTING_UP_GIT_HOOKS",
        "SETTING_UP_SKILLS",
        "STARTING_CONVERSATION",
      ].sort(),
    );
    // The answer is the row as stored (timestamps as the API formats them).
    expect(task.createdAt).toBe(row.created_at);
    expect(task.updatedAt).toBe(row.updated_at);
    expect(task.request).toEqual(row.request);
  });

  it("opens a conversation as the worker's pipeline does: the same first events and the same webhook deliveries", async () => {
    const user = await usersRepository(database.db).create();
    await sql`insert into webhooks (id, user_id, url, events, secret_sealed)
              values (${newId()}, ${user.id}, 'http://127.0.0.1:9/h',
                      array['start_task.status', 'conversation.event', 'conversation.execution_status'], 'x')`.execute(
      database.db,
    );
    const [rowId] = await addRows(1, "You are the same agent.");
    const row = await database.db
      .selectFrom("warm_sandboxes")
      .selectAll()
      .where("id", "=", rowId as string)
      .executeTakeFirstOrThrow();
    const request = {
      initial_message: { role: "user" as const, content: [{ type: "text" as const, text: "open me" }] },
      agent_type: "plan" as const,
      system_message_suffix: "Be brief.",
    };
    // The API's warm claim, with secrets of its own (sealed in the claim's transaction).
    const warm = await startConversation(deps(), user.id, { ...request, secrets: { S: "value-1" } });
    expect(warm.status).toBe("READY");
    expect(
      (await startTaskSecretsRepository(database.db).listAllSealed()).filter((r) => r.startTaskId === warm.id),
    ).toHaveLength(1);

    // The worker's pipeline, as its last stages write it: the task, its sandbox, the conversation
    // opened (openConversation), then READY with the first run.
    const task = await startTasksRepository(database.db).create(user.id, request);
    const sandbox = await sandboxesRepository(database.db).upsert({
      name: `tern-sbx-${task.id}`,
      image: SPEC,
      startTaskId: task.id,
      status: "RUNNING",
    });
    const conversation = await openConversation(
      { db: database.db, secretBox, defaultLlmModel: "row-model" },
      {
        task,
        conversationId: newId(),
        sandboxId: sandbox.id,
        workspace: { dir: row.workspace_dir, repository: null },
        skills: [],
        hooks: [],
        systemPrompt: () => ({ text: row.system_prompt.text, tools: row.system_prompt.tools as SystemPromptTool[] }),
      },
    );
    // Opened twice (a retried attempt): nothing more is written.
    await openConversation(
      { db: database.db, secretBox, defaultLlmModel: "row-model" },
      {
        task,
        conversationId: newId(),
        sandboxId: sandbox.id,
        workspace: { dir: row.workspace_dir, repository: null },
        skills: [],
        hooks: [],
        systemPrompt: () => ({ text: "another prompt", tools: [] }),
      },
    );
    await database.db.transaction().execute(async (trx) => {
      expect(await startTasksRepository(trx).markReady(task.id, 0, conversation.id)).toBe(true);
      await requestRun(trx, conversation.id, "engine-a", conversation.id);
    });

    const eventsOf = async (conversationId: string) =>
      (
        await database.db
          .selectFrom("events")
          .select(["seq", "kind", "source", "payload"])
          .where("conversation_id", "=", conversationId)
          .orderBy("seq")
          .execute()
      ).map((e) => ({ seq: e.seq, kind: e.kind, source: e.source, payload: e.payload }));
    const warmEvents = await eventsOf(warm.appConversationId as string);
    expect(warmEvents.map((e) => e.kind)).toEqual(["SystemPromptEvent", "MessageEvent"]);
    expect(await eventsOf(conversation.id)).toEqual(warmEvents);
    expect(JSON.stringify(warmEvents[0]?.payload)).toContain("You are the same agent.\\n\\nYou are in planning mode");

    const deliveries = await database.db
      .selectFrom("webhook_deliveries")
      .select(["event_type", "data"])
      .orderBy("created_at")
      .execute();
    const hex = (s: string | null) => (s ?? "").replaceAll("-", "");
    const of = (taskId: string, conversationId: string) =>
      deliveries
        .filter((d) => {
          const data = d.data as { id?: string; conversation_id?: string };
          return data.id === hex(taskId) || data.conversation_id === hex(conversationId);
        })
        .map((d) => {
          const data = d.data as Record<string, unknown>;
          const event = data.event as Record<string, unknown> | undefined;
          return {
            type: d.event_type,
            keys: Object.keys(data).sort(),
            status: data.status ?? null,
            event: event ? { ...event, id: "-", timestamp: "-" } : null,
          };
        });
    expect(of(task.id, conversation.id)).toEqual(of(warm.id, warm.appConversationId as string));
    expect(of(warm.id, warm.appConversationId as string).map((d) => [d.type, d.status])).toEqual([
      ["start_task.status", "WORKING"],
      ["conversation.event", null],
      ["conversation.event", null],
      ["start_task.status", "READY"],
    ]);
    const ready = deliveries.find(
      (d) =>
        d.event_type === "start_task.status" &&
        (d.data as { id: string; status: string }).status === "READY" &&
        (d.data as { id: string }).id === hex(warm.id),
    );
    expect(ready?.data).toEqual({
      id: hex(warm.id),
      status: "READY",
      detail: null,
      app_conversation_id: hex(warm.appConversationId),
      sandbox_id: hex(warm.sandboxId),
      created_at: warm.createdAt,
      updated_at: warm.updatedAt,
    });
    // Each asked for its first run, as a queued row under the conversation's own id.
    const runs = await database.db
      .selectFrom("agent_runs")
      .select(["id", "conversation_id", "status", "engine_id"])
      .where("conversation_id", "in", [conversation.id, warm.appConversationId as string])
      .orderBy("requested_at")
      .execute();
    expect(runs).toEqual([
      { id: warm.appConversationId, conversation_id: warm.appConversationId, status: "queued", engine_id: "engine-a" },
      { id: conversation.id, conversation_id: conversation.id, status: "queued", engine_id: "engine-a" },
    ]);
  });

  it("a start past a quota is refused with nothing written and no row taken", async () => {
    const user = await usersRepository(database.db).create();
    await addRows(1);
    const before = await unclaimed();
    // One start in flight (the queue path: a repository).
    await startConversation(deps(), user.id, { selected_repository: "octo/hello" });
    const tasksBefore = await database.db
      .selectFrom("start_tasks")
      .select("id")
      .where("user_id", "=", user.id)
      .execute();
    await expect(startConversation(deps({ limits: { maxStartsInFlightPerUser: 1 } }), user.id, {})).rejects.toThrow(
      QuotaExceededError,
    );
    await expect(startConversation(deps({ limits: { maxSandboxesPerUser: 1 } }), user.id, {})).rejects.toThrow(
      /MAX_SANDBOXES_PER_USER reached: 1 of 1/,
    );
    expect(await unclaimed()).toBe(before);
    const tasksAfter = await database.db
      .selectFrom("start_tasks")
      .select("id")
      .where("user_id", "=", user.id)
      .execute();
    expect(tasksAfter).toHaveLength(tasksBefore.length);
  });

  it("racing starts for a user's last sandbox: one is served, the other refused (the lock, then fresh counts)", async () => {
    for (let round = 0; round < 5; round++) {
      const user = await usersRepository(database.db).create();
      await addRows(2);
      const limits = { maxSandboxesPerUser: 1 };
      const results = await Promise.allSettled([
        startConversation(deps({ limits }), user.id, {}),
        startConversation(deps({ limits }), user.id, {}),
      ]);
      const served = results.filter((r) => r.status === "fulfilled");
      const refused = results.filter((r) => r.status === "rejected");
      expect(served).toHaveLength(1);
      expect(refused).toHaveLength(1);
      expect((refused[0] as PromiseRejectedResult).reason).toBeInstanceOf(QuotaExceededError);
    }
  });

  it("a miss writes nothing and the start goes to the queue; the worker directory is read only then", async () => {
    const user = await usersRepository(database.db).create();
    let asked = 0;
    const workersAlive = async () => {
      asked++;
      return 1;
    };
    await database.db.updateTable("warm_sandboxes").set({ healthy: false }).where("spec", "=", SPEC).execute();
    const missed = await startConversation(deps({ workersAlive }), user.id, {});
    expect(missed.status).toBe("WORKING");
    expect(await queues.start.getJob(missed.id)).toBeTruthy();
    expect(asked).toBe(1);
    await addRows(1);
    const hit = await startConversation(deps({ workersAlive }), user.id, {});
    expect(hit.status).toBe("READY");
    expect(asked).toBe(1);
  });
});

describe("the queue path's stage history", () => {
  it("records each stage the worker enters, with its time, and the end", async () => {
    const user = await usersRepository(database.db).create();
    const repo = startTasksRepository(database.db);
    const task = await repo.create(user.id, {});
    expect(await repo.enterStage(task.id, 0, "WAITING_FOR_SANDBOX")).toBe(true);
    expect(await repo.enterStage(task.id, 0, "PREPARING_REPOSITORY", { stage: "WAITING_FOR_SANDBOX", ms: 3 })).toBe(
      true,
    );
    // A fenced-out attempt writes no history either.
    expect(await repo.enterStage(task.id, 7, "RUNNING_SETUP_SCRIPT")).toBe(false);
    expect(await repo.markReady(task.id, 0, newId())).toBe(true);
    const other = await repo.create(user.id, {});
    expect(await repo.markError(other.id, "boom")).toBe(true);
    const rows = await database.db
      .selectFrom("start_tasks")
      .select(["id", "stage_history", "created_at"])
      .where("id", "in", [task.id, other.id])
      .execute();
    const history = rows.find((r) => r.id === task.id)?.stage_history ?? [];
    expect(history.map((h) => h.status)).toEqual(["WORKING", "WAITING_FOR_SANDBOX", "PREPARING_REPOSITORY", "READY"]);
    expect(history[0]?.at).toBe(rows.find((r) => r.id === task.id)?.created_at);
    const times = history.map((h) => Date.parse(h.at));
    expect(times.every(Number.isFinite)).toBe(true);
    expect([...times].sort((a, b) => a - b)).toEqual(times);
    expect(rows.find((r) => r.id === other.id)?.stage_history.map((h) => h.status)).toEqual(["WORKING", "ERROR"]);
  });
});
