import { toHexId } from "@tern/core";
import { eventsRepository, sandboxesRepository, startTasksRepository } from "@tern/db";
import { createConversationFixture } from "@tern/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestApi, type TestApi } from "./harness.ts";

/**
 * Per-user quotas (live sandboxes, starts in flight, keys) and size caps (a message's text, a
 * conversation's events), as the API answers them. No worker runs here: a start stays in flight.
 */
let api: TestApi;

const SANDBOXES = 3;
const IN_FLIGHT = 2;
const KEYS = 3;
const MESSAGE_BYTES = 1024;
const EVENTS = 6;

beforeAll(async () => {
  api = await startTestApi({
    env: {
      MAX_SANDBOXES_PER_USER: String(SANDBOXES),
      MAX_STARTS_IN_FLIGHT_PER_USER: String(IN_FLIGHT),
      MAX_KEYS_PER_USER: String(KEYS),
      MAX_MESSAGE_BYTES: String(MESSAGE_BYTES),
      MAX_EVENTS_PER_CONVERSATION: String(EVENTS),
      // A client-named LLM for the agent server's conversations (nothing calls it: no worker runs).
      LLM_USER_BASE_URLS: "http://127.0.0.1:9",
    },
  });
});
afterAll(async () => api?.close());

interface ErrorAnswer {
  error: { code: string; message: string; details?: { quota?: string; limit?: number } };
  detail: string;
}

const start = (key: string, body: unknown = {}) =>
  api.call("/api/v1/app-conversations", { method: "POST", key, json: body });
const text = (t: string) => [{ type: "text", text: t }];

/** Makes the user's start tasks READY with a RUNNING sandbox each, as the worker would: no longer in flight. */
const finishStarts = async (userId: string) => {
  const tasks = await api.database.db
    .selectFrom("start_tasks")
    .select("id")
    .where("user_id", "=", userId)
    .where("status", "=", "WORKING")
    .execute();
  const sandboxIds: string[] = [];
  for (const t of tasks) {
    const sandbox = await sandboxesRepository(api.database.db).upsert({
      name: `quota-test-${t.id}`,
      image: "test",
      startTaskId: t.id,
      status: "RUNNING",
    });
    await api.database.db.updateTable("start_tasks").set({ status: "READY" }).where("id", "=", t.id).execute();
    sandboxIds.push(sandbox.id);
  }
  return sandboxIds;
};

const expectQuota = async (res: Response, quota: string, limit: number) => {
  expect(res.status).toBe(429);
  expect(Number(res.headers.get("retry-after"))).toBeGreaterThan(0);
  const body = (await res.json()) as ErrorAnswer;
  expect(body.error.code).toBe("quota_exceeded");
  expect(body.error.details).toEqual({ quota, limit });
  expect(body.detail).toContain(quota);
  return body;
};

describe("starts in flight", () => {
  it("refuses a start past MAX_STARTS_IN_FLIGHT_PER_USER, and takes one again once a start finished", async () => {
    const { key, userId } = await api.newUser();
    for (let i = 0; i < IN_FLIGHT; i++) expect((await start(key)).status).toBe(200);
    const body = await expectQuota(await start(key), "MAX_STARTS_IN_FLIGHT_PER_USER", IN_FLIGHT);
    expect(body.detail).toMatch(/2 of 2 starts and agent-server runs are still in progress/);
    // Another user is not affected.
    expect((await start((await api.newUser()).key)).status).toBe(200);
    await finishStarts(userId);
    expect((await start(key)).status).toBe(200);
  });
});

describe("live sandboxes", () => {
  it("refuses a start past MAX_SANDBOXES_PER_USER, counting starts in flight; a removed sandbox frees its slot", async () => {
    const { key, userId } = await api.newUser();
    expect((await start(key)).status).toBe(200);
    expect((await start(key)).status).toBe(200);
    const [first] = await finishStarts(userId);
    expect((await start(key)).status).toBe(200);
    // Two READY with live sandboxes, one in flight: three of three.
    const body = await expectQuota(await start(key), "MAX_SANDBOXES_PER_USER", SANDBOXES);
    expect(body.detail).toMatch(/3 of 3 sandboxes are live.*delete a conversation/);
    // A paused sandbox still counts (it keeps its memory); a MISSING one does not.
    await sandboxesRepository(api.database.db).update(first as string, { status: "PAUSED" });
    await expectQuota(await start(key), "MAX_SANDBOXES_PER_USER", SANDBOXES);
    await sandboxesRepository(api.database.db).update(first as string, { status: "MISSING" });
    expect((await start(key)).status).toBe(200);
  });

  it("lets exactly one of many concurrent starts take the last slot", async () => {
    for (let round = 0; round < 3; round++) {
      const { key, userId } = await api.newUser();
      expect((await start(key)).status).toBe(200);
      await finishStarts(userId);
      expect((await start(key)).status).toBe(200);
      await finishStarts(userId);
      // One slot left of three; eight requests race for it.
      const answers = await Promise.all(Array.from({ length: 8 }, () => start(key)));
      const statuses = answers.map((r) => r.status).sort();
      expect(statuses).toEqual([200, 429, 429, 429, 429, 429, 429, 429]);
      const tasks = await api.database.db
        .selectFrom("start_tasks")
        .select("id")
        .where("user_id", "=", userId)
        .execute();
      expect(tasks).toHaveLength(SANDBOXES);
    }
  });
});

describe("keys", () => {
  it("refuses a key past MAX_KEYS_PER_USER live ones; a revoked key frees its slot", async () => {
    const { key } = await api.newUser();
    const created: string[] = [];
    for (let i = 1; i < KEYS; i++) {
      const res = await api.call("/api/keys", { method: "POST", key, json: { name: `k${i}` } });
      expect(res.status).toBe(201);
      created.push(((await res.json()) as { id: string }).id);
    }
    const body = await expectQuota(
      await api.call("/api/keys", { method: "POST", key, json: { name: "one too many" } }),
      "MAX_KEYS_PER_USER",
      KEYS,
    );
    expect(body.detail).toMatch(/revoke one/);
    expect((await api.call(`/api/keys/${created[0]}`, { method: "DELETE", key })).status).toBe(200);
    expect((await api.call("/api/keys", { method: "POST", key, json: { name: "again" } })).status).toBe(201);
  });

  it("lets exactly one of many concurrent key requests take the last slot", async () => {
    const { key, userId } = await api.newUser();
    await api.call("/api/keys", { method: "POST", key, json: {} });
    const answers = await Promise.all(
      Array.from({ length: 6 }, () => api.call("/api/keys", { method: "POST", key, json: {} })),
    );
    expect(answers.map((r) => r.status).sort()).toEqual([201, 429, 429, 429, 429, 429]);
    const live = await api.database.db
      .selectFrom("api_keys")
      .select("id")
      .where("user_id", "=", userId)
      .where("revoked_at", "is", null)
      .execute();
    expect(live).toHaveLength(KEYS);
  });
});

describe("message size", () => {
  it("refuses a message whose text is longer than MAX_MESSAGE_BYTES (UTF-8 bytes, not characters)", async () => {
    const { key, userId } = await api.newUser();
    const { conversationId } = await createConversationFixture(api.database.db, { userId });
    const send = (t: string) =>
      api.call(`/api/v1/conversation/${conversationId}/events`, { method: "POST", key, json: { content: text(t) } });
    expect((await send("a".repeat(MESSAGE_BYTES))).status).toBe(200);
    // 600 characters, 1200 bytes.
    const refused = await send("é".repeat(600));
    expect(refused.status).toBe(413);
    const body = (await refused.json()) as ErrorAnswer;
    expect(body.error.code).toBe("payload_too_large");
    expect(body.detail).toMatch(/1200 bytes; at most 1024 are allowed \(MAX_MESSAGE_BYTES\)/);
    const stored = await eventsRepository(api.database.db).listAll(conversationId);
    expect(stored.filter((e) => e.kind === "MessageEvent")).toHaveLength(1);
  });

  it("refuses a start whose initial message is too long, before anything is written", async () => {
    const { key, userId } = await api.newUser();
    const res = await start(key, { initial_message: { role: "user", content: text("x".repeat(MESSAGE_BYTES + 1)) } });
    expect(res.status).toBe(413);
    const tasks = await api.database.db.selectFrom("start_tasks").select("id").where("user_id", "=", userId).execute();
    expect(tasks).toEqual([]);
  });
});

describe("events per conversation", () => {
  it("refuses an append past MAX_EVENTS_PER_CONVERSATION with 409, storing nothing", async () => {
    const { key, userId } = await api.newUser();
    const { conversationId } = await createConversationFixture(api.database.db, { userId });
    const send = () =>
      api.call(`/api/v1/conversation/${conversationId}/events`, { method: "POST", key, json: { content: text("hi") } });
    for (let i = 0; i < EVENTS; i++) expect((await send()).status).toBe(200);
    const refused = await send();
    expect(refused.status).toBe(409);
    const body = (await refused.json()) as ErrorAnswer;
    expect(body.error.code).toBe("conflict");
    expect(body.detail).toMatch(/limit of 6 events \(MAX_EVENTS_PER_CONVERSATION\)/);
    // A pause would be an event too.
    expect((await api.call(`/api/v1/conversation/${conversationId}/pause`, { method: "POST", key })).status).toBe(409);
    expect(await eventsRepository(api.database.db).listAll(conversationId)).toHaveLength(EVENTS);
  });
});

describe("agent-server runs in progress", () => {
  /** A sandbox of the user's that is RUNNING, as a finished start leaves it (hex id). */
  const runningSandbox = async (userId: string) => {
    const task = await startTasksRepository(api.database.db).create(userId, {});
    await api.database.db.updateTable("start_tasks").set({ status: "READY" }).where("id", "=", task.id).execute();
    const sandbox = await sandboxesRepository(api.database.db).upsert({
      name: `quota-test-agent-${task.id}`,
      image: "test",
      startTaskId: task.id,
      status: "RUNNING",
    });
    return toHexId(sandbox.id);
  };

  const startIn = (key: string, sandboxId: string, message: string | null) =>
    api.call(`/agent/${sandboxId}/api/conversations`, {
      method: "POST",
      key,
      json: {
        agent: { kind: "Agent", llm: { model: "gpt-quota", base_url: "http://127.0.0.1:9/v1", api_key: "sk-q" } },
        workspace: { kind: "LocalWorkspace", working_dir: "/workspace" },
        ...(message === null ? {} : { initial_message: { role: "user", content: text(message) } }),
      },
    });

  it("count against MAX_STARTS_IN_FLIGHT_PER_USER: a new run past it is refused, its own next run is not", async () => {
    const { key, userId } = await api.newUser();
    const sandboxId = await runningSandbox(userId);
    const running: string[] = [];
    for (let i = 0; i < IN_FLIGHT; i++) {
      const res = await startIn(key, sandboxId, `run ${i}`);
      expect(res.status, await res.clone().text()).toBe(201);
      running.push(((await res.json()) as { id: string }).id);
    }
    const refused = await startIn(key, sandboxId, "one too many");
    expect(refused.status, await refused.clone().text()).toBe(429);
    expect(Number(refused.headers.get("retry-after"))).toBeGreaterThan(0);
    expect(((await refused.json()) as { detail: string }).detail).toContain("MAX_STARTS_IN_FLIGHT_PER_USER");
    // Refused before anything was written: the sandbox holds the two conversations only.
    const listed = await api.call(`/agent/${sandboxId}/api/conversations/count`, { key });
    expect(await listed.json()).toBe(IN_FLIGHT);
    // A conversation without a first message asks for no run, and a running one's next message
    // adds no run beside its own: both pass.
    expect((await startIn(key, sandboxId, null)).status).toBe(201);
    const next = await api.call(`/agent/${sandboxId}/api/conversations/${running[0]}/events`, {
      method: "POST",
      key,
      json: { role: "user", content: text("and then"), run: true },
    });
    expect(next.status, await next.clone().text()).toBe(200);
    // An app start in flight takes a slot of the same quota too: the user is at it.
    expect((await start(key)).status).toBe(429);
  });
});
