import { type ApiClient, type ScriptedLlmServer, type ServiceProcess, testSandboxDriver, waitFor } from "@tern/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestApi, type TestApi } from "./harness.ts";

/**
 * The follow-up routes end to end: the real API (in this process) and a real worker process on
 * the same database and Redis prefix, real sandboxes, and the scripted LLM on loopback.
 */
let api: TestApi;
let llm: ScriptedLlmServer;
let worker: ServiceProcess;
let client: ApiClient;
let key: string;
let otherKey: string;

beforeAll(async () => {
  api = await startTestApi({ llm: true });
  llm = api.stack.llm;
  ({ key } = await api.newUser());
  ({ key: otherKey } = await api.newUser());
  client = api.client(key);
});

afterAll(async () => api?.close());

/** A worker process on the test's database and Redis prefix, speaking to the scripted LLM as `provider`. */
const startWorker = async (provider: "openai" | "anthropic" | "none") => {
  await worker?.stop();
  worker = await api.stack.startWorker(llm.workerEnv(provider));
};

/** Starts a conversation through the API and follows its task until READY; returns the conversation id. */
const startConversation = async (text: string, run: boolean): Promise<string> =>
  (await client.start({ initial_message: { role: "user", content: [{ type: "text", text }], run } }, 60_000)).id;

interface ConversationRecord {
  id: string;
  execution_status: string;
  sandbox_status: string;
  metrics: Record<string, number>;
}

interface EventItem {
  id: string;
  kind: string;
  source: string;
  timestamp: string;
  key?: string;
  value?: string;
  [k: string]: unknown;
}

const conversation = (id: string) => client.conversation<ConversationRecord>(id);
const waitForStatus = (id: string, statuses: string[]) =>
  client.waitForExecution<ConversationRecord>(id, statuses, 30_000);
/** Waits until the scripted replies are used up and the run that used them has ended. */
const settle = (id: string) => client.settle<ConversationRecord>(id, llm.remaining, 30_000);
/** Seven at a time: the pages are followed. */
const allEvents = (id: string) => client.events<EventItem>(id, 7);

const say = (id: string, text: string, run: boolean, as = key) =>
  api.call(`/api/v1/conversation/${id}/events`, {
    method: "POST",
    key: as,
    json: { role: "user", content: [{ type: "text", text }], run },
  });

const hold = () => {
  let release: () => void = () => undefined;
  let reached: () => void = () => undefined;
  const held = new Promise<void>((r) => {
    release = r;
  });
  const inFlight = new Promise<void>((r) => {
    reached = r;
  });
  return {
    release,
    inFlight,
    before: async () => {
      reached();
      await held;
    },
  };
};

describe.each(["openai", "anthropic"] as const)("follow-ups on a started conversation (%s)", (provider) => {
  let conversationId = "";

  beforeAll(async () => {
    await startWorker(provider);
  });

  it("starts with run: true, and the agent works in the sandbox", async () => {
    llm.push(
      {
        toolCalls: [{ name: "file_editor", arguments: { command: "create", path: "notes.txt", file_text: "first\n" } }],
      },
      { text: "Created notes.txt." },
    );
    conversationId = await startConversation("Create notes.txt", true);
    const c = await settle(conversationId);
    expect(c.execution_status).toBe("finished");
    expect(llm.requests.at(-1)?.provider).toBe(provider);
    expect(c.sandbox_status).toBe("RUNNING");
    expect(c.metrics.llm_calls).toBe(2);
  });

  it("POST /events appends the message and, with run, the agent answers it with the whole history", async () => {
    llm.push({ text: "Second answer." });
    expect(await client.json(await say(conversationId, "And now?", true))).toEqual({ success: true });
    expect((await settle(conversationId)).execution_status).toBe("finished");
    const sent = JSON.stringify(llm.requests.at(-1)?.body);
    expect(sent.indexOf("Create notes.txt")).toBeLessThan(sent.indexOf("Created notes.txt."));
    expect(sent.indexOf("Created notes.txt.")).toBeLessThan(sent.indexOf("And now?"));
  });

  it("POST /events without run only stores the message; POST /run answers it", async () => {
    const asked = llm.requests.length;
    expect(await client.json(await say(conversationId, "Quiet note.", false))).toEqual({ success: true });
    const events = await allEvents(conversationId);
    expect(events.at(-1)).toMatchObject({
      kind: "MessageEvent",
      source: "user",
      llm_message: { role: "user", content: [{ type: "text", text: "Quiet note." }] },
    });
    expect(llm.requests.length).toBe(asked);
    expect((await conversation(conversationId)).execution_status).toBe("finished");
    llm.push({ text: "Noted." });
    expect(
      await client.json(await api.call(`/api/v1/conversation/${conversationId}/run`, { method: "POST", key })),
    ).toEqual({
      success: true,
    });
    expect((await settle(conversationId)).execution_status).toBe("finished");
    expect(llm.requests.length).toBe(asked + 1);
  });

  it("pauses a run between steps; /run while running is a 409; /run after the pause continues", async () => {
    const h = hold();
    llm.push(
      { toolCalls: [{ name: "terminal", arguments: { command: "echo second >> notes.txt" } }], before: h.before },
      { text: "Appended." },
    );
    await client.json(await say(conversationId, "Append a line.", true));
    await h.inFlight;
    expect((await conversation(conversationId)).execution_status).toBe("running");
    const busy = await api.call(`/api/v1/conversation/${conversationId}/run`, { method: "POST", key });
    expect(busy.status).toBe(409);
    expect(
      await client.json(await api.call(`/api/v1/conversation/${conversationId}/pause`, { method: "POST", key })),
    ).toEqual({
      success: true,
    });
    h.release();
    expect((await waitForStatus(conversationId, ["paused"])).execution_status).toBe("paused");
    expect(llm.remaining()).toBe(1);
    await client.json(await api.call(`/api/v1/conversation/${conversationId}/run`, { method: "POST", key }));
    expect((await settle(conversationId)).execution_status).toBe("finished");
    const kinds = (await allEvents(conversationId)).map((e) =>
      e.kind === "ConversationStateUpdateEvent" ? e.value : e.kind,
    );
    expect(kinds.slice(-9)).toEqual([
      "MessageEvent",
      "running",
      // Asked while the model was answering: the call it made still ran, then the run stopped.
      "PauseEvent",
      "ActionEvent",
      "ObservationEvent",
      "paused",
      "running",
      "MessageEvent",
      "finished",
    ]);
  });

  it("answers 404 for another user's conversation and 422 for a malformed message", async () => {
    for (const [method, path] of [
      ["POST", `/api/v1/conversation/${conversationId}/pause`],
      ["POST", `/api/v1/conversation/${conversationId}/run`],
      ["DELETE", `/api/v1/app-conversations/${conversationId}`],
    ] as const) {
      expect((await api.call(path, { method, key: otherKey })).status).toBe(404);
    }
    expect((await say(conversationId, "not yours", true, otherKey)).status).toBe(404);
    const bad = await api.call(`/api/v1/conversation/${conversationId}/events`, {
      method: "POST",
      key,
      json: { role: "user", content: [] },
    });
    expect(bad.status).toBe(422);
    const asAgent = await api.call(`/api/v1/conversation/${conversationId}/events`, {
      method: "POST",
      key,
      json: { role: "assistant", content: [{ type: "text", text: "x" }] },
    });
    expect(asAgent.status).toBe(422);
  });

  it("lists the follow-up routes in /openapi.json", async () => {
    const doc = await client.json<{ paths: Record<string, Record<string, unknown>> }>(await api.call("/openapi.json"));
    expect(Object.keys(doc.paths["/api/v1/conversation/{conversation_id}/events"] ?? {})).toContain("post");
    expect(Object.keys(doc.paths["/api/v1/conversation/{conversation_id}/pause"] ?? {})).toContain("post");
    expect(Object.keys(doc.paths["/api/v1/conversation/{conversation_id}/run"] ?? {})).toContain("post");
    expect(Object.keys(doc.paths["/api/v1/app-conversations/{conversation_id}"] ?? {})).toContain("delete");
  });

  it("the events search returns the whole history in order, and execution_status is the last state change", async () => {
    const events = await allEvents(conversationId);
    const stored = await api.database.db
      .selectFrom("events")
      .select(["id", "seq"])
      .where("conversation_id", "=", conversationId)
      .orderBy("seq")
      .execute();
    expect(events.map((e) => e.id)).toEqual(stored.map((e) => e.id));
    for (let i = 1; i < events.length; i++) {
      expect(Date.parse(events[i]?.timestamp ?? "") >= Date.parse(events[i - 1]?.timestamp ?? "")).toBe(true);
      // Strictly increasing, as instants and as text (six fraction digits always).
      expect((events[i]?.timestamp ?? "") > (events[i - 1]?.timestamp ?? "")).toBe(true);
    }
    expect(events[0]?.kind).toBe("SystemPromptEvent");
    const kinds = new Set(events.map((e) => e.kind));
    for (const k of ["MessageEvent", "ActionEvent", "ObservationEvent", "ConversationStateUpdateEvent", "PauseEvent"]) {
      expect(kinds).toContain(k);
    }
    const lastChange = events.filter((e) => e.kind === "ConversationStateUpdateEvent").at(-1);
    expect(lastChange).toMatchObject({ key: "execution_status" });
    expect((await conversation(conversationId)).execution_status).toBe(lastChange?.value);
    const action = events.find((e) => e.kind === "ActionEvent");
    expect(action).toMatchObject({ source: "agent", tool_name: "file_editor" });
    expect(Object.keys(action ?? {})).toEqual(expect.arrayContaining(["tool_call_id", "thought", "action"]));
    const observation = events.find((e) => e.kind === "ObservationEvent");
    expect(observation).toMatchObject({
      source: "environment",
      action_id: action?.id,
      tool_call_id: action?.tool_call_id,
    });
  });

  it("DELETE removes the sandbox (sandbox_status MISSING), keeps the events, and refuses to run again", async () => {
    const before = (await allEvents(conversationId)).length;
    expect(
      await client.json(await api.call(`/api/v1/app-conversations/${conversationId}`, { method: "DELETE", key })),
    ).toEqual({ success: true });
    await waitFor(async () => (await conversation(conversationId)).sandbox_status === "MISSING", {
      what: "sandbox_status MISSING",
      timeoutMs: 30_000,
    });
    const left = await testSandboxDriver().list({ "tern.conversation_id": conversationId });
    expect(left).toHaveLength(0);
    expect((await allEvents(conversationId)).length).toBe(before);
    expect((await say(conversationId, "Still there?", true)).status).toBe(409);
    expect((await api.call(`/api/v1/conversation/${conversationId}/run`, { method: "POST", key })).status).toBe(409);
    // A second DELETE is harmless.
    expect((await api.call(`/api/v1/app-conversations/${conversationId}`, { method: "DELETE", key })).status).toBe(200);
  });
});

describe("without an LLM configured", () => {
  beforeAll(async () => {
    await startWorker("none");
  });

  it("the conversation still reaches READY; its run ends at once with an AgentErrorEvent saying how to configure one", async () => {
    const asked = llm.requests.length;
    const id = await startConversation("Hello?", true);
    await waitFor(async () => (await conversation(id)).execution_status === "error", {
      what: "execution_status error",
      timeoutMs: 30_000,
    });
    const events = await allEvents(id);
    const error = events.find((e) => e.kind === "AgentErrorEvent");
    expect(error?.source).toBe("agent");
    expect(String(error?.error)).toMatch(/LLM_PROVIDER/);
    expect(String(error?.error)).toMatch(/LLM_API_KEY/);
    expect(events.filter((e) => e.kind === "ConversationStateUpdateEvent").map((e) => e.value)).toEqual([
      "running",
      "error",
    ]);
    expect((await conversation(id)).sandbox_status).toBe("RUNNING");
    expect(llm.requests.length).toBe(asked);
  });
});
