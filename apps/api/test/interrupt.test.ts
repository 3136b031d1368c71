import { parseId } from "@tern/core";
import { type ApiClient, type ScriptedLlmServer, testSandboxDriver, waitFor } from "@tern/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestApi, type TestApi } from "./harness.ts";

/**
 * POST /interrupt end to end: the real API (in this process), a real worker process on the same
 * database and Redis prefix, real sandboxes and the scripted LLM. The API never reaches the
 * sandbox: its word goes to the worker holding the run (Redis), which stops the run at once.
 */
let api: TestApi;
let llm: ScriptedLlmServer;
let client: ApiClient;
let key: string;
let otherKey: string;
const sandboxes = testSandboxDriver();

beforeAll(async () => {
  api = await startTestApi({ worker: true, llm: true });
  llm = api.stack.llm;
  ({ key } = await api.newUser());
  ({ key: otherKey } = await api.newUser());
  client = api.client(key);
});

afterAll(async () => api?.close());

const worker = () => api.stack.worker;

interface ConversationRecord {
  id: string;
  execution_status: string;
  session_api_key: string;
}

interface EventItem {
  kind: string;
  key?: string;
  value?: string;
  observation?: { exit_code?: number; content?: { text: string }[] };
  llm_message?: { role: string };
}

const conversation = (id: string) => client.conversation<ConversationRecord>(id);

const events = async (id: string): Promise<EventItem[]> =>
  (
    await client.json<{ items: EventItem[] }>(
      await api.call(`/api/v1/conversation/${id}/events/search?limit=100`, { key }),
    )
  ).items;

const kindsOf = (items: EventItem[]) =>
  items.map((e) => (e.kind === "ConversationStateUpdateEvent" ? e.value : e.kind));

/** Starts a conversation whose first message starts the agent; resolves once it is READY. */
const start = async (text: string): Promise<string> =>
  (await client.start({ initial_message: { role: "user", content: [{ type: "text", text }] } })).id;

const sandboxOf = async (conversationId: string): Promise<string> => {
  const [info] = await sandboxes.list({
    "tern.namespace": api.prefix,
    "tern.conversation_id": parseId(conversationId) ?? "",
  });
  if (!info) throw new Error("no sandbox");
  return info.ref;
};

/** POST /interrupt as `headers` say; how long until the conversation is `paused` (ms). */
const interruptAndTime = async (id: string, headers: Record<string, string>) => {
  const began = Date.now();
  expect(
    await client.json(await api.call(`/api/v1/conversation/${id}/interrupt`, { method: "POST", headers })),
  ).toEqual({
    success: true,
  });
  await waitFor(async () => (await conversation(id)).execution_status === "paused", {
    what: "the run to stop",
    timeoutMs: 20_000,
    intervalMs: 20,
    detail: () => worker().output().slice(-3000),
  });
  return Date.now() - began;
};

describe("POST /api/v1/conversation/{id}/interrupt", () => {
  it("stops a 60 s command within 1 s (Ctrl-C), with its session key; /run then continues", async () => {
    llm.push(
      { toolCalls: [{ name: "terminal", arguments: { command: "touch /tmp/began; sleep 60; echo never-printed" } }] },
      { text: "Stopped as asked." },
    );
    const id = await start("Sleep a minute.");
    const ref = await sandboxOf(id);
    await waitFor(async () => (await sandboxes.exec(ref, { cmd: ["test", "-e", "/tmp/began"] })).exitCode === 0, {
      what: "the command to run",
      timeoutMs: 60_000,
      detail: async () => `${JSON.stringify(await events(id))}\n${worker().output().slice(-3000)}`,
    });
    const { session_api_key } = await conversation(id);
    const took = await interruptAndTime(id, { "X-Session-API-Key": session_api_key });
    expect(took).toBeLessThanOrEqual(1_000);

    const items = await events(id);
    expect(kindsOf(items).slice(-6)).toEqual([
      "running",
      "ActionEvent",
      "InterruptEvent",
      "PauseEvent",
      "ObservationEvent",
      "paused",
    ]);
    const observation = items.find((e) => e.kind === "ObservationEvent")?.observation;
    expect(observation?.exit_code).toBe(130);
    expect(observation?.content?.[0]?.text).not.toContain("never-printed");
    // The sleep is gone from the sandbox, not left running.
    expect((await sandboxes.exec(ref, { cmd: ["pgrep", "-f", "sleep 60"] })).exitCode).toBe(1);

    await client.json(await api.call(`/api/v1/conversation/${id}/run`, { method: "POST", key }));
    await waitFor(async () => (await conversation(id)).execution_status === "finished", {
      what: "the continued run to finish",
      timeoutMs: 30_000,
    });
    expect(kindsOf(await events(id)).slice(-3)).toEqual(["running", "MessageEvent", "finished"]);
  }, 180_000);

  it("stops a slow LLM response within 1 s, storing nothing of it", async () => {
    let reached: () => void = () => undefined;
    const inFlight = new Promise<void>((r) => {
      reached = r;
    });
    let release: () => void = () => undefined;
    const held = new Promise<void>((r) => {
      release = r;
    });
    llm.push({
      text: "An answer that comes too late.",
      before: async () => {
        reached();
        await held;
      },
    });
    const id = await start("Think for a long time.");
    await inFlight;
    const took = await interruptAndTime(id, { authorization: `Bearer ${key}` });
    release();
    expect(took).toBeLessThanOrEqual(1_000);
    const items = await events(id);
    expect(kindsOf(items).slice(-4)).toEqual(["running", "InterruptEvent", "PauseEvent", "paused"]);
    // Stays so: the late answer is never written.
    await new Promise((r) => setTimeout(r, 500));
    expect(items.filter((e) => e.kind === "MessageEvent" && e.llm_message?.role === "assistant")).toEqual([]);
    expect((await events(id)).length).toBe(items.length);
  }, 180_000);

  it("is another user's 404, and another conversation's session key cannot interrupt this one", async () => {
    llm.push({ text: "Hello." }, { text: "Hello again." });
    const a = await start("Say hello.");
    const b = await start("Say hello too.");
    const bKey = (await conversation(b)).session_api_key;
    const path = `/api/v1/conversation/${a}/interrupt`;
    expect((await api.call(path, { method: "POST", key: otherKey })).status).toBe(404);
    expect((await api.call(path, { method: "POST", headers: { "X-Session-API-Key": bKey } })).status).toBe(404);
    expect(kindsOf(await events(a))).not.toContain("InterruptEvent");
    // A session key still may not pause (only interrupt, its own conversation).
    expect(
      (await api.call(`/api/v1/conversation/${b}/pause`, { method: "POST", headers: { "X-Session-API-Key": bKey } }))
        .status,
    ).toBe(401);
  }, 180_000);
});
