import { randomUUID } from "node:crypto";
import { type McpConfig, type StoredEvent, type StoredEventOf, textOfContent } from "@tern/core";
import { MALFORMED_SERVER_PY, STDIO_SERVER_PY, startTestMcpServer, type TestMcpServer } from "@tern/testing/mcp-server";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type AgentRunContext, runAgent } from "../src/loop.ts";
import { connectMcpServers, type McpServerStatus } from "../src/mcp/session.ts";
import { createRunFixture, type RunFixture } from "./run-fixture.ts";

/**
 * The user's MCP servers through the real loop: a remote one written with the
 * official SDK's server side on loopback, a stdio one as a stdlib-only Python script inside the
 * real sandbox, and bad ones (hanging, crashing mid-call, malformed, on a refused address) with the
 * run carrying on. Each call is an ActionEvent / ObservationEvent pair, as every tool's.
 */
let fx: RunFixture;
let remote: TestMcpServer;
beforeAll(async () => {
  [fx, remote] = await Promise.all([createRunFixture(), startTestMcpServer()]);
}, 90_000);
afterAll(async () => {
  await remote?.close();
  await fx?.close();
});

const loopbackAllowed = { MCP_ALLOW_HTTP: true, MCP_ALLOW_PRIVATE: true };

const runWith = async (
  conversationId: string,
  mcpConfig: McpConfig,
  settings: Record<string, unknown> = loopbackAllowed,
  secrets: Record<string, string> = {},
) => {
  const deps = fx.depsFor("openai");
  const context: AgentRunContext = { secrets, llm: null, maxIterations: null, maxBudgetPerTask: null, mcpConfig };
  const outcome = await runAgent(
    { ...deps, settings: { ...deps.settings, ...settings }, runContext: async () => context },
    conversationId,
    randomUUID(),
  );
  return { outcome, conversation: await fx.conversation(conversationId), events: await fx.events(conversationId) };
};

const call = (name: string, args: Record<string, unknown> = {}) => ({ name, arguments: args });
const observations = (events: StoredEvent[]) =>
  events.filter((e): e is StoredEventOf<"ObservationEvent"> => e.kind === "ObservationEvent");
const resultText = (e: StoredEventOf<"ObservationEvent"> | undefined) =>
  textOfContent(e?.payload.observation.content ?? []);
const serverStatus = (events: StoredEvent[]): McpServerStatus[] => {
  const e = events.find((x) => x.kind === "ConversationStateUpdateEvent" && x.payload.key === "mcp_servers");
  return (e?.kind === "ConversationStateUpdateEvent" ? e.payload.value : []) as McpServerStatus[];
};
const offeredTools = (i: number): string[] =>
  ((fx.llm.requests[i]?.body.tools ?? []) as { function?: { name: string }; name?: string }[]).map(
    (t) => t.function?.name ?? t.name ?? "",
  );

describe("a remote MCP server (official SDK, streamable HTTP)", () => {
  it("is listed, its tools offered as name__tool, called, and the result stored and shown to the model", async () => {
    const { conversationId } = await fx.newConversation({ message: "Add 2 and 3." });
    const firstRequest = fx.llm.requests.length;
    fx.llm.push(
      { toolCalls: [call("remote__add", { a: 2, b: 3 }), call("remote__big", { bytes: 50_000 })] },
      { text: "It is 5." },
    );
    const { conversation, events } = await runWith(conversationId, {
      mcpServers: { remote: { url: remote.url } },
    });
    expect(conversation.executionStatus).toBe("finished");
    expect(serverStatus(events)).toEqual([{ name: "remote", transport: "http", status: "ready", tools: 4 }]);
    expect(offeredTools(firstRequest)).toEqual(
      expect.arrayContaining(["terminal", "remote__add", "remote__whoami", "remote__hang", "remote__big"]),
    );
    const action = events.find((e) => e.kind === "ActionEvent" && e.payload.tool_name === "remote__add");
    expect(action?.kind === "ActionEvent" && action.payload.action).toEqual({
      kind: "MCPToolAction",
      data: { a: 2, b: 3 },
    });
    const [added, big] = observations(events);
    expect(added?.payload).toMatchObject({
      tool_name: "remote__add",
      action_id: action?.id,
      observation: { kind: "MCPToolObservation", is_error: false, content: [{ type: "text", text: "sum=5" }] },
    });
    // The output cap holds (30 000 bytes by default), and says so.
    expect(resultText(big).length).toBeLessThan(31_000);
    expect(resultText(big)).toMatch(/\[Output was cut: 20000 more bytes were left out\.\]$/);
    expect(JSON.stringify(fx.llm.requests.at(-1)?.body)).toContain("sum=5");
  }, 90_000);
});

describe("confirm: always", () => {
  it("marks every tool of that server, and only those, for the confirmation policy", async () => {
    const set = await connectMcpServers(
      {
        mcpServers: { careful: { url: remote.url, confirm: "always" }, plain: { url: remote.url, confirm: "policy" } },
      },
      {
        sandboxes: fx.sandboxes,
        sandboxRef: null,
        workspaceDir: "/workspace/project",
        settings: loopbackAllowed,
        secrets: {},
        logger: fx.depsFor("openai").logger,
      },
    );
    try {
      expect(set.definitions.map((d) => d.name).filter((n) => n.endsWith("__add"))).toEqual([
        "careful__add",
        "plain__add",
      ]);
      expect(set.alwaysConfirm("careful__add")).toBe(true);
      expect(set.alwaysConfirm("careful__hang")).toBe(true);
      expect(set.alwaysConfirm("plain__add")).toBe(false);
      expect(set.alwaysConfirm("terminal")).toBe(false);
      expect([...set.argumentNames("plain__add")]).toEqual(["a", "b"]);
    } finally {
      await set.close();
    }
  });

  it("through the loop: a careful server's call waits under NeverConfirm, a plain one's runs; risk and summary are the event's, not the server's", async () => {
    const { conversationId } = await fx.newConversation({ message: "Add numbers carefully." });
    const firstRequest = fx.llm.requests.length;
    fx.llm.push(
      { toolCalls: [call("plain__add", { a: 1, b: 1, security_risk: "LOW", summary: "add one and one" })] },
      { toolCalls: [call("careful__add", { a: 2, b: 2, security_risk: "LOW", summary: "add two and two" })] },
    );
    const { outcome, events } = await runWith(conversationId, {
      mcpServers: { careful: { url: remote.url, confirm: "always" }, plain: { url: remote.url } },
    });
    expect(outcome).toEqual({ outcome: "ended", status: "waiting_for_confirmation" });
    const actions = events.filter((e): e is StoredEventOf<"ActionEvent"> => e.kind === "ActionEvent");
    expect(
      actions.map((a) => [a.payload.tool_name, a.payload.security_risk, a.payload.summary, a.payload.action]),
    ).toEqual([
      ["plain__add", "LOW", "add one and one", { kind: "MCPToolAction", data: { a: 1, b: 1 } }],
      ["careful__add", "LOW", "add two and two", { kind: "MCPToolAction", data: { a: 2, b: 2 } }],
    ]);
    // The plain call ran (its server saw only its own arguments); the careful one waits, not run.
    expect(observations(events).map((o) => [o.payload.tool_name, resultText(o)])).toEqual([["plain__add", "sum=2"]]);
    // MCP tools are asked for both fields, as every tool is.
    const offered = (fx.llm.requests[firstRequest]?.body.tools ?? []) as {
      function: { name: string; parameters: { required?: string[] } };
    }[];
    const careful = offered.find((t) => t.function.name === "careful__add");
    expect(careful?.function.parameters.required).toEqual(
      expect.arrayContaining(["a", "b", "security_risk", "summary"]),
    );
  }, 90_000);

  it("MCP_MAX_TOOLS caps the tools in all, over every server, and says which were left out", async () => {
    const set = await connectMcpServers(
      { mcpServers: { one: { url: remote.url }, two: { url: remote.url } } },
      {
        sandboxes: fx.sandboxes,
        sandboxRef: null,
        workspaceDir: "/workspace/project",
        settings: { ...loopbackAllowed, MCP_MAX_TOOLS: 5 },
        secrets: {},
        logger: fx.depsFor("openai").logger,
      },
    );
    try {
      expect(set.definitions).toHaveLength(5);
      expect(set.status.map((s) => [s.name, s.tools, s.left_out?.length ?? 0])).toEqual([
        ["one", 4, 0],
        ["two", 1, 3],
      ]);
      expect(set.status[1]?.left_out?.[0]?.reason).toBe("past MCP_MAX_TOOLS (5)");
    } finally {
      await set.close();
    }
  });
});

describe("a remote MCP server on the older SSE transport", () => {
  it("is reached with transport (or type): sse, and without a transport named (streamable HTTP first, then SSE)", async () => {
    const { conversationId } = await fx.newConversation({ message: "Add." });
    fx.llm.push(
      {
        toolCalls: [
          call("old__add", { a: 20, b: 22 }),
          call("guessed__add", { a: 1, b: 2 }),
          call("typed__add", { a: 2, b: 2 }),
        ],
      },
      { text: "Done." },
    );
    const { conversation, events } = await runWith(conversationId, {
      mcpServers: {
        old: { url: remote.sseUrl, transport: "sse" },
        guessed: { url: remote.sseUrl },
        typed: { url: remote.sseUrl, type: "sse" },
      },
    });
    expect(conversation.executionStatus).toBe("finished");
    expect(serverStatus(events)).toEqual([
      { name: "old", transport: "sse", status: "ready", tools: 4 },
      { name: "guessed", transport: "http", status: "ready", tools: 4 },
      { name: "typed", transport: "sse", status: "ready", tools: 4 },
    ]);
    expect(observations(events).map(resultText)).toEqual(["sum=42", "sum=3", "sum=4"]);
  }, 60_000);
});

describe("a stdio MCP server", () => {
  it("runs inside the sandbox as a stdlib-only Python script, is called, and is started again when it dies mid-call", async () => {
    const { conversationId, sandboxRef } = await fx.newConversation({ message: "Use the py server." });
    // The script exists only in the sandbox: the server cannot be running anywhere else.
    await fx.sandboxes.upload(sandboxRef, "/tmp/mcp", [{ path: "server.py", content: STDIO_SERVER_PY }]);
    const greeting = `greeting-${randomUUID()}`;
    fx.llm.push(
      { toolCalls: [call("py__pid"), call("py__echo", { text: "hi" }), call("py__env", { name: "GREETING" })] },
      { toolCalls: [call("py__crash")] },
      { toolCalls: [call("py__pid")] },
      { text: "Done." },
    );
    const { conversation, events } = await runWith(
      conversationId,
      {
        mcpServers: {
          py: { command: "python3", args: ["/tmp/mcp/server.py"], env: { GREETING: "<secret:GREETING>" } },
        },
      },
      loopbackAllowed,
      { GREETING: greeting },
    );
    expect(conversation.executionStatus).toBe("finished");
    expect(serverStatus(events)).toEqual([{ name: "py", transport: "stdio", status: "ready", tools: 5 }]);
    const at = (pred: (e: StoredEvent) => boolean) => Date.parse(events.find(pred)?.timestamp ?? "");
    const startMs =
      at((e) => e.kind === "ConversationStateUpdateEvent" && e.payload.key === "mcp_servers") -
      at((e) => e.kind === "ConversationStateUpdateEvent" && e.payload.key === "execution_status");
    console.info(`stdio server started in the sandbox and listed in ${startMs} ms`);
    const results = observations(events).map((o) => [resultText(o), o.payload.observation.is_error]);
    const firstPid = /^pid=(\d+)$/.exec(String(results[0]?.[0]))?.[1];
    const secondPid = /^pid=(\d+)$/.exec(String(results[4]?.[0]))?.[1];
    expect(results.slice(1, 4)).toEqual([
      ["echo=hi", false],
      // The server got the secret's value in its environment; the stored result has it masked.
      ["env=<secret:GREETING>", false],
      [expect.stringMatching(/^The MCP tool crash of server py failed: .*(closed|Connection)/i), true],
    ]);
    expect(firstPid).toBeTruthy();
    expect(secondPid).toBeTruthy();
    // Started again after it died: a new process.
    expect(secondPid).not.toBe(firstPid);
    expect(JSON.stringify(events)).not.toContain(greeting);
    // The run stopped it on its way out (the probe finds such a process when one runs).
    const probe = "pgrep -f 'python3 /tmp/mcp/serve[r].py' || echo none";
    expect((await fx.exec(sandboxRef, probe)).trim()).toBe("none");
    const control = await fx.exec(
      sandboxRef,
      `(sleep 30 | python3 /tmp/mcp/$(echo server).py &); sleep 0.5; ${probe}; pkill -f 'python3 /tmp/mcp/serve[r].py'`,
    );
    expect(control.trim()).toMatch(/^\d+$/);
  }, 120_000);
});

describe("bad MCP servers", () => {
  it("one that hangs, one that is not JSON-RPC, one not there: the run carries on with the rest", async () => {
    const { conversationId, sandboxRef } = await fx.newConversation({ message: "Try them all." });
    await fx.sandboxes.upload(sandboxRef, "/tmp/mcp", [
      { path: "bad.py", content: MALFORMED_SERVER_PY },
      { path: "server.py", content: STDIO_SERVER_PY },
    ]);
    fx.llm.push(
      { toolCalls: [call("slow__hang"), call("py__sleep")] },
      { toolCalls: [call("py__echo", { text: "still here" })] },
      { text: "Carried on." },
    );
    const began = performance.now();
    const { conversation, events } = await runWith(
      conversationId,
      {
        mcpServers: {
          slow: { url: remote.url },
          garbled: { command: "python3", args: ["/tmp/mcp/bad.py"] },
          missing: { command: "/no/such/program" },
          empty: { command: "python3", args: ["/tmp/mcp/server.py"], env: { NO_TOOLS: "1" } },
          odd: { command: "python3", args: ["/tmp/mcp/server.py"], env: { ODD_TOOLS: "1" } },
          py: { command: "python3", args: ["/tmp/mcp/server.py"] },
        },
      },
      { ...loopbackAllowed, MCP_CALL_TIMEOUT_MS: 1_500, MCP_CONNECT_TIMEOUT_MS: 10_000 },
    );
    const seconds = (performance.now() - began) / 1000;
    expect(conversation.executionStatus).toBe("finished");
    const status = serverStatus(events);
    expect(status.find((s) => s.name === "garbled")).toMatchObject({
      status: "failed",
      reason: expect.stringContaining("malformed JSON-RPC"),
    });
    expect(status.find((s) => s.name === "missing")).toMatchObject({ status: "failed", tools: 0 });
    expect(status.find((s) => s.name === "empty")).toMatchObject({ status: "failed", reason: "it lists no tools" });
    expect(status.find((s) => s.name === "odd")).toMatchObject({
      status: "ready",
      tools: 5,
      left_out: [
        { tool: "wide", reason: expect.stringMatching(/^its schema is \d+ bytes \(at most 32768\)$/) },
        { tool: "bad name!", reason: expect.stringContaining("is not a valid tool name") },
      ],
    });
    expect(status.find((s) => s.name === "slow")).toMatchObject({ status: "ready", tools: 4 });
    const [hung, slept, echoed] = observations(events);
    // A hung stdio server is stopped at the timeout and started again for the next call: the echo
    // below could not be answered by the one still sleeping.
    expect(resultText(slept)).toBe("The MCP tool sleep of server py did not answer within 2 seconds.");
    expect(hung?.payload.observation.is_error).toBe(true);
    expect(resultText(hung)).toBe("The MCP tool hang of server slow did not answer within 2 seconds.");
    expect(resultText(echoed)).toBe("echo=still here");
    // Only the failed servers' tools are missing from what the model is offered.
    const tools = offeredTools(fx.llm.requests.length - 1);
    expect(tools).toContain("py__echo");
    expect(tools.some((t) => t.startsWith("garbled__") || t.startsWith("missing__"))).toBe(false);
    console.info(`bad servers run: ${seconds.toFixed(1)} s`);
  }, 120_000);

  it("one on a loopback address is refused unless MCP_ALLOW_PRIVATE, and never contacted", async () => {
    const { conversationId } = await fx.newConversation({ message: "Use it." });
    const before = remote.requests.length;
    fx.llm.push({ toolCalls: [call("local__add", { a: 1, b: 1 })] }, { text: "No such tool, carrying on." });
    const { conversation, events } = await runWith(
      conversationId,
      { mcpServers: { local: { url: remote.url } } },
      { MCP_ALLOW_HTTP: true, MCP_ALLOW_PRIVATE: false },
    );
    expect(conversation.executionStatus).toBe("finished");
    expect(serverStatus(events)).toEqual([
      {
        name: "local",
        transport: "http",
        status: "failed",
        tools: 0,
        reason: expect.stringContaining("a private, loopback or link-local address"),
      },
    ]);
    // The same server answers when allowed (the first test): here it saw nothing at all.
    expect(remote.requests.length).toBe(before);
    // The model's call of a tool it was not offered is a bad call it reads.
    const error = events.find((e) => e.kind === "AgentErrorEvent");
    expect(error?.kind === "AgentErrorEvent" && error.payload.error).toContain('Unknown tool "local__add"');
  }, 60_000);
});
