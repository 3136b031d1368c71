import { randomUUID } from "node:crypto";
import { llmKeyContext, userLlmForRun } from "@tern/services";
import { hostsResolver } from "@tern/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestApi, type TestApi } from "./harness.ts";

/** Per-user LLM settings and the operator's allow-list of models. */
let api: TestApi;
beforeAll(async () => {
  api = await startTestApi({
    env: { LLM_PROVIDER: "openai", LLM_MODELS: "gpt-4o,openai/gpt-4o-mini" },
    // A public name, and one that looks public but resolves to loopback (never real DNS here).
    resolve: hostsResolver({ "llm.example.com": "93.184.216.34", "llm.rebind.example": "127.0.0.1" }),
  });
});
afterAll(async () => api?.close());

// biome-ignore lint/suspicious/noExplicitAny: the answers' JSON, read field by field
type Json = Record<string, any>;
const CANARY = `sk-canary-${randomUUID()}`;
const bodies: string[] = [];
const call = async (key: string, path: string, json?: unknown) => {
  const res = await api.call(path, { key, method: json === undefined ? "GET" : "POST", json });
  const text = await res.text();
  bodies.push(text);
  return { status: res.status, body: JSON.parse(text) as Json };
};

describe("GET and POST /api/v1/settings", () => {
  it("start empty; a change keeps what it does not name and null clears; the key is write-only and sealed", async () => {
    const { key, userId } = await api.newUser();
    expect((await call(key, "/api/v1/settings")).body).toEqual({
      llm_model: null,
      llm_base_url: null,
      llm_api_key_set: false,
      max_iterations: null,
      max_budget_per_task: null,
      llm_extended_thinking_budget: null,
      llm_reasoning_effort: null,
      confirmation_mode: false,
      security_analyzer: "llm",
      mcp_config: null,
    });
    const set = await call(key, "/api/v1/settings", {
      llm_model: "anthropic/claude-sonnet-4-5",
      llm_api_key: CANARY,
      max_iterations: 30,
      max_budget_per_task: 2.5,
      llm_extended_thinking_budget: 8_000,
      llm_reasoning_effort: "high",
      confirmation_mode: true,
      security_analyzer: "none",
    });
    expect(set.status).toBe(200);
    expect(set.body).toEqual({
      llm_model: "anthropic/claude-sonnet-4-5",
      llm_base_url: null,
      llm_api_key_set: true,
      max_iterations: 30,
      max_budget_per_task: 2.5,
      llm_extended_thinking_budget: 8_000,
      llm_reasoning_effort: "high",
      confirmation_mode: true,
      security_analyzer: "none",
      mcp_config: null,
    });
    const row = await api.database.db
      .selectFrom("user_settings")
      .selectAll()
      .where("user_id", "=", userId)
      .executeTakeFirstOrThrow();
    expect(row.llm_api_key).not.toContain(CANARY);
    expect(api.secretBox.open(row.llm_api_key ?? "", llmKeyContext(userId))).toBe(CANARY);
    expect(await userLlmForRun({ db: api.database.db, secretBox: api.secretBox }, userId)).toEqual({
      // The user's reasoning goes to each run, over the operator's LLM_THINKING_BUDGET and LLM_REASONING_EFFORT.
      llm: {
        model: "anthropic/claude-sonnet-4-5",
        baseUrl: null,
        apiKey: CANARY,
        thinkingBudget: 8_000,
        reasoningEffort: "high",
      },
      maxIterations: 30,
      maxBudgetPerTask: 2.5,
      confirmation: { confirmationMode: true, securityAnalyzer: "none" },
    });

    const kept = await call(key, "/api/v1/settings", { max_iterations: null });
    expect(kept.body).toMatchObject({
      llm_model: "anthropic/claude-sonnet-4-5",
      llm_api_key_set: true,
      max_iterations: null,
    });
    const me = await call(key, "/api/v1/users/me");
    expect(me.body).toMatchObject({ llm_model: "anthropic/claude-sonnet-4-5", llm_api_key_set: true });
    expect((await call(key, "/api/v1/settings", { llm_api_key: null })).body.llm_api_key_set).toBe(false);
    // Reasoning alone (no model or key of their own) still reaches the run, on the operator's LLM.
    await call(key, "/api/v1/settings", { llm_model: null, llm_extended_thinking_budget: 0 });
    expect((await userLlmForRun({ db: api.database.db, secretBox: api.secretBox }, userId)).llm).toEqual({
      model: null,
      baseUrl: null,
      apiKey: null,
      thinkingBudget: 0,
      reasoningEffort: "high",
    });
  });

  it("refuses bad values with 422 naming the field", async () => {
    const { key } = await api.newUser();
    for (const [field, body] of [
      ["security_analyzer", { security_analyzer: "invariant" }],
      ["confirmation_mode", { confirmation_mode: "yes" }],
      ["max_iterations", { max_iterations: 0 }],
      ["max_budget_per_task", { max_budget_per_task: -1 }],
      ["llm_extended_thinking_budget", { llm_extended_thinking_budget: 1.5 }],
      ["llm_reasoning_effort", { llm_reasoning_effort: "maximal" }],
      ["llm_base_url", { llm_base_url: "ftp://x" }],
      ["llm_model", { llm_model: "" }],
    ] as const) {
      const res = await call(key, "/api/v1/settings", body);
      expect(res.status, field).toBe(422);
      expect(res.body.detail).toMatch(field);
    }
  });

  it("refuses an llm_base_url inside the deployment (loopback, private, link-local, plain http)", async () => {
    const { key } = await api.newUser();
    for (const url of [
      "http://api.openai.com/v1",
      "https://127.0.0.1/v1",
      "https://localhost:8080/v1",
      // A trailing dot and upper case name the same host; a public-looking name may resolve inside.
      "https://localhost.:5432/v1",
      "https://LOCALHOST.:6379/v1",
      "https://llm.rebind.example/v1",
      "https://10.0.0.8/v1",
      "https://169.254.169.254/latest",
      "https://[::1]/v1",
    ]) {
      const res = await call(key, "/api/v1/settings", { llm_base_url: url, llm_api_key: CANARY });
      expect(res.status, url).toBe(422);
      expect(res.body.detail).toMatch(/^llm_base_url: /);
    }
    expect((await call(key, "/api/v1/settings")).body.llm_api_key_set).toBe(false);
    expect((await call(key, "/api/v1/settings", { llm_base_url: "https://llm.example.com/v1" })).status).toBe(200);
  });

  it("refuses an MCP server URL inside the deployment, or plain http, unless the operator allows it", async () => {
    const { key } = await api.newUser();
    for (const url of [
      "http://93.184.216.34/mcp",
      "https://127.0.0.1/mcp",
      "https://10.0.0.8/mcp",
      "https://169.254.169.254/latest",
      "https://[::1]/mcp",
      "https://user:pw@93.184.216.34/mcp",
    ]) {
      const res = await call(key, "/api/v1/settings", { mcp_config: { mcpServers: { s: { url } } } });
      expect(res.status, url).toBe(422);
      expect(res.body.detail).toMatch(/^mcp_config\.mcpServers\.s\.url: /);
    }
    expect((await call(key, "/api/v1/settings")).body.mcp_config).toBeNull();
    const ok = await call(key, "/api/v1/settings", {
      mcp_config: {
        mcpServers: { s: { url: "https://93.184.216.34/mcp" }, py: { command: "python3", args: ["s.py"] } },
      },
    });
    expect(ok.status).toBe(200);
    expect(Object.keys(ok.body.mcp_config.mcpServers)).toEqual(["s", "py"]);
    // The shapes other clients write: `type` for the transport (Claude Code, VS Code), a description.
    const claudeStyle = {
      mcpServers: {
        web: { type: "sse", url: "https://93.184.216.34/sse", description: "old server" },
        local: { type: "stdio", command: "npx", args: ["-y", "some-server"] },
      },
    };
    const taken = await call(key, "/api/v1/settings", { mcp_config: claudeStyle });
    expect(taken.status).toBe(200);
    expect(taken.body.mcp_config).toEqual(claudeStyle);
    expect(
      (
        await call(key, "/api/v1/settings", {
          mcp_config: { mcpServers: { s: { url: "https://93.184.216.34", oauth: {} } } },
        })
      ).status,
    ).toBe(422);
    expect((await call(key, "/api/v1/settings", { mcp_config: null })).body.mcp_config).toBeNull();
  });
});

describe("LLM_MODELS", () => {
  const start = (key: string, llm_model: string) =>
    call(key, "/api/v1/app-conversations", {
      initial_message: { role: "user", content: [{ type: "text", text: "hi" }] },
      llm_model,
    });

  it("holds a start's llm_model on the operator's key to the list, and to its provider", async () => {
    const { key } = await api.newUser();
    expect((await start(key, "gpt-4o")).status).toBe(200);
    expect((await start(key, "openai/gpt-4o-mini")).status).toBe(200);
    const other = await start(key, "gpt-4.5-preview");
    expect(other.status).toBe(422);
    expect(other.body.detail).toMatch(/^llm_model: llm_model gpt-4.5-preview is not offered by this deployment/);
    const provider = await start(key, "anthropic/gpt-4o");
    expect(provider.status).toBe(422);
    expect(provider.body.detail).toMatch(/anthropic model; this deployment's LLM is openai/);
    expect((await call(key, "/api/v1/settings", { llm_model: "claude-opus-4-1" })).status).toBe(422);
  });

  it("lets a user with a key of their own use any model", async () => {
    const { key } = await api.newUser();
    expect(
      (await call(key, "/api/v1/settings", { llm_api_key: CANARY, llm_model: "anthropic/claude-opus-4-1" })).status,
    ).toBe(200);
    expect((await start(key, "anthropic/claude-haiku-4-5")).status).toBe(200);
  });

  it("never answers with the key", () => {
    for (const text of bodies) expect(text).not.toContain(CANARY);
  });
});
