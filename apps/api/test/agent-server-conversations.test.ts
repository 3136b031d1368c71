import { parseId } from "@tern/core";
import { sandboxesRepository } from "@tern/db";
import { type ApiClient, type ScriptedLlmServer, startLlmServer, waitFor } from "@tern/testing";
import { Hono } from "hono";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { AgentServerEnv } from "../src/routes/agent-server/context.ts";
import { agentConversationRoutes } from "../src/routes/agent-server/conversations/index.ts";
import { agentServerErrors } from "../src/routes/agent-server/errors.ts";
import { startTestApi, type TestApi } from "./harness.ts";

/**
 * The agent server's /api/conversations and its events, on a real sandbox, a real worker
 * and the scripted LLM. The worker has NO LLM of its own: a conversation runs only on the LLM its
 * client names. The group is mounted under a test middleware that sets `agentSandbox` for the
 * sandbox of the URL (the real mount, with its auth, is another helper's).
 * Assertions follow the SDK's models: ConversationInfo (openhands-agent-server models.py), Event
 * (`kind`, `id`, `timestamp`, `source`), AgentErrorEvent's required tool_name/tool_call_id.
 */
let api: TestApi;
let llm: ScriptedLlmServer;
let client: ApiClient;
let userId: string;
let userKey: string;
let sandboxId: string;
let firstConversationId: string;
/** A conversation of the same user in another sandbox: never reached through this one's agent server. */
let elsewhereId: string;
const app = new Hono<AgentServerEnv>();
const CLIENT_KEY = "sk-client-own-key-7f3a9c51d2";

beforeAll(async () => {
  // The deployment has no LLM of its own; the clients' endpoint is an entry of LLM_USER_BASE_URLS.
  llm = await startLlmServer();
  const allow = { LLM_USER_BASE_URLS: llm.url };
  api = await startTestApi({ worker: true, workerEnv: allow, env: allow });
  const user = await api.newUser();
  userId = user.userId;
  userKey = user.key;
  client = api.client(user.key);
  // A live sandbox: an app-server start with no message (no run, so no LLM needed).
  [firstConversationId, elsewhereId] = await Promise.all([
    client.start({}).then((s) => s.id),
    client.start({}).then((s) => parseId(s.id) ?? ""),
  ]);
  const row = await api.database.db
    .selectFrom("conversations")
    .select("sandbox_id")
    .where("id", "=", parseId(firstConversationId) ?? "")
    .executeTakeFirstOrThrow();
  sandboxId = row.sandbox_id ?? "";
  app.use("/agent/:sandbox_id/*", async (c, next) => {
    const sandbox = await sandboxesRepository(api.database.db).get(c.req.param("sandbox_id") ?? "");
    if (!sandbox) return c.json({ detail: "Not Found" }, 404);
    c.set("agentSandbox", { sandboxId: sandbox.id, userId, via: "api_key", conversationId: null });
    c.set("principal", { kind: "api_key", userId, isAdmin: false, keyId: "test" });
    await next();
  });
  app.route("/agent/:sandbox_id", agentConversationRoutes(api.deps));
  app.onError(agentServerErrors(api.logger));
}, 180_000);

afterAll(async () => {
  await api?.close();
  await llm?.close();
});

const call = async (path: string, init: { method?: string; json?: unknown } = {}): Promise<Response> =>
  app.request(`/agent/${sandboxId}${path}`, {
    method: init.method ?? "GET",
    ...(init.json !== undefined
      ? { body: JSON.stringify(init.json), headers: { "content-type": "application/json" } }
      : {}),
  });

const json = async <T = Record<string, unknown>>(res: Response, status: number): Promise<T> => {
  const text = await res.text();
  expect(res.status, text).toBe(status);
  return JSON.parse(text) as T;
};

/** StartConversationRequest as RemoteConversation sends it (agent.model_dump with expose_secrets). */
const startBody = (key: string, extra: Record<string, unknown> = {}, agent: Record<string, unknown> = {}) => ({
  agent: {
    kind: "Agent",
    llm: { model: "gpt-client", base_url: llm.openaiBaseUrl, api_key: CLIENT_KEY, usage_id: "agent", temperature: 0 },
    tools: [
      { name: "terminal", params: {} },
      { name: "file_editor", params: {} },
    ],
    mcp_config: {},
    include_default_tools: ["FinishTool", "ThinkTool"],
    ...agent,
  },
  workspace: { kind: "LocalWorkspace", working_dir: "/workspace" },
  initial_message: { role: "user", content: [{ type: "text", text: key }], run: true },
  max_iterations: 20,
  stuck_detection: true,
  tool_module_qualnames: {},
  agent_definitions: [],
  plugins: null,
  hook_config: null,
  client_tools: [],
  tags: {},
  ...extra,
});

/** The parts of the SDK's ConversationInfo these tests read. */
interface ConversationInfo {
  id: string;
  title: string | null;
  execution_status: string;
  confirmation_policy: { kind: string };
  workspace: { kind: string; working_dir: string };
  agent: { kind: string; llm: Record<string, unknown>; tools: { name: string }[] };
}

const info = async (id: string) => json<ConversationInfo>(await call(`/api/conversations/${id}`), 200);

interface Event {
  id: string;
  kind: string;
  source: string;
  timestamp: string;
  [k: string]: unknown;
}

describe("POST /api/conversations with a client-named LLM", () => {
  let conversationId: string;

  it("runs to the end on the client's LLM and key, its events read back through /events/search", async () => {
    const key = "as-run-to-end";
    llm.pushFor(key, { toolCalls: [{ name: "finish", arguments: { message: "All done here." } }] });
    const res = await call("/api/conversations", { method: "POST", json: startBody(key) });
    const text = await res.text();
    expect(res.status, text).toBe(201);
    // The key is never echoed: ConversationInfo shows it as pydantic's SecretStr does.
    expect(text).not.toContain(CLIENT_KEY);
    const started = JSON.parse(text) as ConversationInfo;
    conversationId = started.id;
    expect(conversationId).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/);
    expect(started.agent.kind).toBe("Agent");
    expect(started.agent.llm).toMatchObject({
      model: "gpt-client",
      base_url: llm.openaiBaseUrl,
      api_key: "**********",
    });
    expect(started.agent.tools.map((t) => t.name)).toEqual(["terminal", "file_editor"]);
    expect(started.workspace).toEqual({ kind: "LocalWorkspace", working_dir: "/workspace" });
    expect(started).toMatchObject({
      max_iterations: 20,
      stuck_detection: true,
      confirmation_policy: { kind: "NeverConfirm" },
    });
    for (const field of [
      "execution_status",
      "created_at",
      "updated_at",
      "stats",
      "secret_registry",
      "tags",
      "client_tools",
    ]) {
      expect(started).toHaveProperty(field);
    }

    // Waits for the run to end either way, so a run that failed shows as such at once.
    const ended = await waitFor(
      async () => {
        const status = (await info(conversationId)).execution_status;
        return ["finished", "error", "stuck"].includes(status) && status;
      },
      { what: "the run to end", timeoutMs: 60_000 },
    );
    expect(ended).toBe("finished");
    // The worker had no LLM: the client's was used, with its own key, and only the tools it named.
    const [request] = llm.requestsFor(key);
    expect(request?.headers.authorization).toBe(`Bearer ${CLIENT_KEY}`);
    const offered = ((request?.body.tools ?? []) as { function: { name: string } }[]).map((t) => t.function.name);
    expect(offered.sort()).toEqual(["file_editor", "finish", "terminal", "think"]);

    const page = await json<{ items: Event[]; next_page_id: string | null }>(
      await call(`/api/conversations/${conversationId}/events/search?limit=100`),
      200,
    );
    const kinds = page.items.map((e) => e.kind);
    expect(kinds).toContain("MessageEvent");
    expect(kinds).toContain("ActionEvent");
    for (const e of page.items) {
      expect(typeof e.id).toBe("string");
      expect(typeof e.timestamp).toBe("string");
      expect(["user", "agent", "environment"]).toContain(e.source);
    }
    const user = page.items.find((e) => e.kind === "MessageEvent" && e.source === "user") as Event & {
      llm_message: { content: unknown[] };
    };
    expect(user.llm_message.content[0]).toEqual({ type: "text", text: key });

    const final = await json(await call(`/api/conversations/${conversationId}/agent_final_response`), 200);
    expect(final).toEqual({ response: "All done here." });
  }, 120_000);

  it("seals the key at rest: the row holds no plaintext, nor does any stored column", async () => {
    const row = await api.database.db
      .selectFrom("agent_server_conversations")
      .selectAll()
      .where("conversation_id", "=", conversationId)
      .executeTakeFirstOrThrow();
    expect(row.llm_api_key_sealed).toBeTruthy();
    expect(JSON.stringify(row)).not.toContain(CLIENT_KEY);
    expect(JSON.stringify(row.agent)).not.toContain(CLIENT_KEY);
  });

  it("filters events by kind, source and body, counts them, and reads them by id", async () => {
    const base = `/api/conversations/${conversationId}/events`;
    const users = await json<{ items: Event[] }>(await call(`${base}/search?source=user`), 200);
    expect(users.items.length).toBeGreaterThan(0);
    expect(users.items.every((e) => e.source === "user")).toBe(true);
    const byBody = await json<{ items: Event[] }>(await call(`${base}/search?body=AS-RUN-TO`), 200);
    expect(byBody.items.map((e) => e.kind)).toEqual(["MessageEvent"]);
    expect(await json(await call(`${base}/search?body=nothing-like-this`), 200)).toEqual({
      items: [],
      next_page_id: null,
    });
    const actions = await json<{ items: Event[] }>(await call(`${base}/search?kind=ActionEvent`), 200);
    expect(actions.items.every((e) => e.kind === "ActionEvent")).toBe(true);
    expect(await json(await call(`${base}/count?kind=ActionEvent`), 200)).toBe(actions.items.length);
    const desc = await json<{ items: Event[] }>(await call(`${base}/search?sort_order=TIMESTAMP_DESC&limit=2`), 200);
    expect(desc.items).toHaveLength(2);
    expect(Date.parse(desc.items[0]!.timestamp)).toBeGreaterThanOrEqual(Date.parse(desc.items[1]!.timestamp));
    expect((await call(`${base}/search?limit=101`)).status).toBe(422);
    const one = byBody.items[0]!;
    expect(await json(await call(`${base}/${one.id}`), 200)).toEqual(one);
    expect((await call(`${base}/00000000-0000-4000-8000-000000000000`)).status).toBe(404);
    const batch = await json<unknown[]>(
      await call(`${base}?event_ids=${one.id}&event_ids=00000000-0000-4000-8000-000000000000`),
      200,
    );
    expect(batch).toEqual([one, null]);
    const later = new Date(Date.parse(one.timestamp) + 1).toISOString();
    const before = await json<{ items: Event[] }>(await call(`${base}/search?timestamp__lt=${later}`), 200);
    expect(before.items.every((e) => Date.parse(e.timestamp) < Date.parse(later))).toBe(true);
  });

  it("lists, counts, batch-reads and renames only this sandbox's conversations", async () => {
    const page = await json<{ items: { id: string }[] }>(await call("/api/conversations/search"), 200);
    const ids = page.items.map((c) => c.id);
    expect(ids).toContain(conversationId);
    expect(ids).toContain(parseId(firstConversationId));
    expect(await json(await call("/api/conversations/count"), 200)).toBe(ids.length);
    expect(await json(await call("/api/conversations/count?status=finished"), 200)).toBeGreaterThanOrEqual(1);
    const batch = await json<({ id: string } | null)[]>(
      await call(`/api/conversations?ids=${conversationId}&ids=00000000-0000-4000-8000-000000000000`),
      200,
    );
    expect(batch.map((c) => c?.id ?? null)).toEqual([conversationId, null]);
    expect((await call("/api/conversations/00000000-0000-4000-8000-000000000000")).status).toBe(404);
    // The same user's conversation in another sandbox is not this agent server's.
    expect(ids).not.toContain(elsewhereId);
    const elsewhere = await call(`/api/conversations/${elsewhereId}`);
    expect(elsewhere.status).toBe(404);
    expect(await elsewhere.json()).toEqual({ detail: expect.any(String) });
    expect(await json(await call(`/api/conversations?ids=${elsewhereId}`), 200)).toEqual([null]);
    for (const [method, path] of [
      ["GET", "/events/search"],
      ["GET", "/events/count"],
      ["POST", "/run"],
      ["POST", "/pause"],
      ["DELETE", ""],
    ] as const) {
      expect((await call(`/api/conversations/${elsewhereId}${path}`, { method })).status, `${method} ${path}`).toBe(
        404,
      );
    }
    expect(
      await json(
        await call(`/api/conversations/${conversationId}`, { method: "PATCH", json: { title: "Renamed" } }),
        200,
      ),
    ).toEqual({
      success: true,
    });
    expect((await info(conversationId)).title).toBe("Renamed");
    expect((await call(`/api/conversations/${conversationId}`, { method: "PATCH", json: { title: "" } })).status).toBe(
      422,
    );
  });

  it("sets the confirmation policy and the conversation's secrets", async () => {
    expect(
      await json(
        await call(`/api/conversations/${conversationId}/confirmation_policy`, {
          method: "POST",
          json: { policy: { kind: "AlwaysConfirm" } },
        }),
        200,
      ),
    ).toEqual({ success: true });
    expect((await info(conversationId)).confirmation_policy).toEqual({ kind: "AlwaysConfirm" });
    await call(`/api/conversations/${conversationId}/confirmation_policy`, {
      method: "POST",
      json: { policy: { kind: "NeverConfirm" } },
    });
    expect(
      await json(
        await call(`/api/conversations/${conversationId}/secrets`, {
          method: "POST",
          json: { secrets: { API_TOKEN: "tok-abc-123", OTHER: { kind: "StaticSecret", value: "v2" } } },
        }),
        200,
      ),
    ).toEqual({ success: true });
    const row = await api.database.db
      .selectFrom("agent_server_conversation_secrets")
      .selectAll()
      .where("conversation_id", "=", conversationId)
      .executeTakeFirstOrThrow();
    expect(row.secrets_sealed).not.toContain("tok-abc-123");
    expect(
      (
        await call(`/api/conversations/${conversationId}/secrets`, {
          method: "POST",
          json: { secrets: { X: { kind: "LookupSecret", url: "https://example.com" } } },
        })
      ).status,
    ).toBe(422);
  });

  it("answers 409 to /run while the agent runs, and pause and interrupt stop it", async () => {
    let release!: () => void;
    const held = new Promise<void>((r) => {
      release = r;
    });
    const key = "as-held-run";
    llm.pushFor(key, { text: "thinking...", before: () => held });
    const started = await json<{ id: string }>(
      await call("/api/conversations", { method: "POST", json: startBody(key) }),
      201,
    );
    await waitFor(() => llm.requestsFor(key).length > 0, { what: "the held LLM call", timeoutMs: 60_000 });
    const res = await call(`/api/conversations/${started.id}/run`, { method: "POST" });
    expect(res.status).toBe(409);
    expect(await res.json()).toEqual({ detail: expect.any(String) });
    expect(await json(await call(`/api/conversations/${started.id}/interrupt`, { method: "POST" }), 200)).toEqual({
      success: true,
    });
    release();
    await waitFor(async () => (await info(started.id)).execution_status === "paused", {
      what: "the interrupted run to end paused",
      timeoutMs: 30_000,
    });
    expect(await json(await call(`/api/conversations/${started.id}/pause`, { method: "POST" }), 200)).toEqual({
      success: true,
    });
  }, 120_000);

  it("takes a message with run through POST /events, and the run answers it", async () => {
    const key = "as-post-events";
    llm.pushFor(key, { toolCalls: [{ name: "finish", arguments: { message: "first" } }] });
    const started = await json<{ id: string }>(
      await call("/api/conversations", { method: "POST", json: startBody(key) }),
      201,
    );
    await waitFor(async () => (await info(started.id)).execution_status === "finished", {
      what: "the first run",
      timeoutMs: 60_000,
    });
    llm.pushFor(key, { toolCalls: [{ name: "finish", arguments: { message: "second answer" } }] });
    expect(
      await json(
        await call(`/api/conversations/${started.id}/events`, {
          method: "POST",
          json: { role: "user", content: [{ type: "text", text: "and again" }], run: true },
        }),
        200,
      ),
    ).toEqual({ success: true });
    await waitFor(
      async () =>
        (await json(await call(`/api/conversations/${started.id}/agent_final_response`), 200)).response ===
        "second answer",
      { what: "the second run", timeoutMs: 60_000 },
    );
    // Nothing waits for confirmation: the agent server's answer is a conflict.
    expect(
      (
        await call(`/api/conversations/${started.id}/events/respond_to_confirmation`, {
          method: "POST",
          json: { accept: true },
        })
      ).status,
    ).toBe(409);
    // DELETE leaves the sandbox alone: the conversation is gone from it, the sandbox runs on.
    expect(await json(await call(`/api/conversations/${started.id}`, { method: "DELETE" }), 200)).toEqual({
      success: true,
    });
    expect((await call(`/api/conversations/${started.id}`)).status).toBe(404);
    expect((await sandboxesRepository(api.database.db).get(sandboxId))?.status).toBe("RUNNING");
  }, 120_000);
});

describe("a conversation's own secrets", () => {
  it("reach the agent's commands as environment, and are stored masked in its events", async () => {
    const key = "as-secrets-env";
    const value = "tok-own-secret-5521";
    llm.pushFor(
      key,
      {
        toolCalls: [
          {
            name: "terminal",
            arguments: { command: 'printf "len=%s v=%s\\n" "$(printf %s "$MY_TOKEN" | wc -c)" "$MY_TOKEN"' },
          },
        ],
      },
      { toolCalls: [{ name: "finish", arguments: { message: "ok" } }] },
    );
    const started = await json<{ id: string }>(
      await call("/api/conversations", {
        method: "POST",
        json: startBody(key, { secrets: { MY_TOKEN: { kind: "StaticSecret", value } } }),
      }),
      201,
    );
    const ended = await waitFor(
      async () => {
        const status = (await info(started.id)).execution_status;
        return ["finished", "error", "stuck"].includes(status) && status;
      },
      { what: "the run to end", timeoutMs: 60_000 },
    );
    expect(ended).toBe("finished");
    const res = await call(`/api/conversations/${started.id}/events/search?kind=ObservationEvent`);
    const text = await res.text();
    expect(res.status).toBe(200);
    expect(text).toContain(`len=${value.length}`);
    expect(text).toContain("<secret:MY_TOKEN>");
    expect(text).not.toContain(value);
  }, 120_000);
});

describe("POST /api/conversations refuses what tern cannot run, naming the field (422)", () => {
  const refused = async (body: unknown, field: RegExp) => {
    const res = await call("/api/conversations", { method: "POST", json: body });
    const text = await res.text();
    expect(res.status, text).toBe(422);
    expect(text).toMatch(field);
    expect(text).not.toContain(CLIENT_KEY);
  };

  it("an unknown tool", () =>
    refused(startBody("x", {}, { tools: [{ name: "browser_tool_set", params: {} }] }), /agent\.tools\[0\]\.name/));
  it("another agent kind", () => refused(startBody("x", {}, { kind: "ACPAgent" }), /agent\.kind/));
  it("an LLM endpoint LLM_USER_BASE_URLS does not allow", () =>
    refused(
      startBody("x", {}, { llm: { model: "gpt-4o", base_url: "https://llm.example.com/v1", api_key: CLIENT_KEY } }),
      /agent\.llm\.base_url/,
    ));
  it("a model on the operator's key outside LLM_MODELS", () =>
    refused(startBody("x", {}, { llm: { model: "gpt-4o" } }), /agent\.llm\.model/));
  it("client tools, plugins and hooks", async () => {
    await refused(startBody("x", { client_tools: [{ name: "t" }] }), /client_tools/);
    await refused(startBody("x", { plugins: [{ source: "x" }] }), /plugins/);
    await refused(startBody("x", { hook_config: { pre_tool_use: [{ command: "x" }] } }), /hook_config/);
  });
  it("no agent at all", () => refused({ workspace: { working_dir: "/workspace" } }, /agent/));
});

describe("a run's own error reads as the SDK's AgentErrorEvent", () => {
  it("carries tool_name and tool_call_id (the SDK requires them), empty for no tool call", async () => {
    const key = "as-llm-error";
    llm.pushFor(key, { error: { status: 400, message: "scripted refusal" } });
    const started = await json<{ id: string }>(
      await call("/api/conversations", { method: "POST", json: startBody(key) }),
      201,
    );
    await waitFor(async () => (await info(started.id)).execution_status === "error", {
      what: "the run to end in error",
      timeoutMs: 60_000,
    });
    const page = await json<{ items: Event[] }>(
      await call(`/api/conversations/${started.id}/events/search?kind=AgentErrorEvent`),
      200,
    );
    expect(page.items.length).toBeGreaterThan(0);
    for (const e of page.items) {
      expect(e).toMatchObject({
        tool_name: expect.any(String),
        tool_call_id: expect.any(String),
        error: expect.any(String),
      });
    }
  }, 120_000);
});

describe("the sandbox-state rule: 409 while paused, 410 once gone, as {detail}", () => {
  const sandboxCall = (path: string) =>
    api.call(`/api/v1/sandboxes/${sandboxId}${path}`, { method: path ? "POST" : "DELETE", key: userKey });

  it("refuses a run and a message with run while the user paused the sandbox, and takes them once resumed", async () => {
    expect((await sandboxCall("/pause")).status).toBe(200);
    const run = await call(`/api/conversations/${parseId(firstConversationId)}/run`, { method: "POST" });
    expect(run.status).toBe(409);
    expect(await run.json()).toEqual({ detail: expect.stringContaining("paused") });
    const message = await call(`/api/conversations/${parseId(firstConversationId)}/events`, {
      method: "POST",
      json: { role: "user", content: [{ type: "text", text: "hi" }], run: true },
    });
    expect(message.status).toBe(409);
    expect((await call("/api/conversations", { method: "POST", json: startBody("as-paused") })).status).toBe(409);
    // Reads go on while paused.
    expect((await call("/api/conversations/search")).status).toBe(200);
    expect((await sandboxCall("/resume")).status).toBe(200);
  }, 120_000);

  it("answers 410 once the sandbox is removed", async () => {
    expect([200, 204]).toContain((await sandboxCall("")).status);
    await waitFor(async () => (await sandboxesRepository(api.database.db).get(sandboxId))?.status === "MISSING", {
      what: "the sandbox to be removed",
      timeoutMs: 60_000,
    });
    const run = await call(`/api/conversations/${parseId(firstConversationId)}/run`, { method: "POST" });
    expect(run.status).toBe(410);
    expect(await run.json()).toEqual({ detail: expect.any(String) });
    expect((await call("/api/conversations", { method: "POST", json: startBody("as-gone") })).status).toBe(410);
  }, 120_000);
});
