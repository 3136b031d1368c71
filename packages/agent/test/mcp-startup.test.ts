import { randomUUID } from "node:crypto";
import { type McpConfig, type StoredEvent, type StoredEventOf, textOfContent } from "@tern/core";
import { waitFor } from "@tern/testing";
import { STDIO_SERVER_PY, startTestMcpServer, type TestMcpServer } from "@tern/testing/mcp-server";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type AgentRunContext, runAgent } from "../src/loop.ts";
import { connectMcpServers, MCP_MAX_LIST_PAGES, type McpServerStatus } from "../src/mcp/session.ts";
import { createRunFixture, type RunFixture } from "./run-fixture.ts";

/**
 * A hostile MCP server cannot hold a run: one whose tools/list names a next page for ever (a
 * stdio server the user names, run in their sandbox) is read so many pages deep and no further;
 * start-up as a whole has one deadline (MCP_STARTUP_TIMEOUT_MS), past which a server still starting
 * is left out and stopped while the run goes on; the user's interrupt ends start-up and tool
 * calls at once; a remote server's answer is cut at MCP_MAX_RESPONSE_BYTES.
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
const PAGES_FILE = "/tmp/mcp/pages";

/** A conversation whose sandbox holds the stdio server's script. */
const conversationWithServer = async (message: string) => {
  const c = await fx.newConversation({ message });
  await fx.sandboxes.upload(c.sandboxRef, "/tmp/mcp", [{ path: "server.py", content: STDIO_SERVER_PY }]);
  return c;
};

/** The endless pager: every tools/list page, after `seconds`, is empty and names a next one. */
const pager = (seconds: number) => ({
  command: "python3",
  args: ["/tmp/mcp/server.py"],
  env: { ENDLESS_PAGES: String(seconds), PAGES_FILE },
});

const pagesAsked = async (sandboxRef: string) =>
  Number((await fx.exec(sandboxRef, `wc -l < ${PAGES_FILE} 2>/dev/null || echo 0`)).trim());
const serverRunning = async (sandboxRef: string) =>
  (await fx.exec(sandboxRef, "pgrep -f 'python3 /tmp/mcp/serve[r].py' || echo none")).trim() !== "none";

const runWith = (
  conversationId: string,
  mcpConfig: McpConfig,
  settings: Record<string, unknown>,
  signals: { interrupt?: AbortSignal; pause?: AbortSignal } = {},
) => {
  const deps = fx.depsFor("openai");
  const context: AgentRunContext = { secrets: {}, llm: null, maxIterations: null, maxBudgetPerTask: null, mcpConfig };
  return runAgent(
    {
      ...deps,
      settings: { ...deps.settings, ...loopbackAllowed, ...settings },
      runContext: async () => context,
      ...signals,
    },
    conversationId,
    randomUUID(),
  );
};

const serverStatus = (events: StoredEvent[]): McpServerStatus[] => {
  const e = events.find((x) => x.kind === "ConversationStateUpdateEvent" && x.payload.key === "mcp_servers");
  return (e?.kind === "ConversationStateUpdateEvent" ? e.payload.value : []) as McpServerStatus[];
};
const observations = (events: StoredEvent[]) =>
  events.filter((e): e is StoredEventOf<"ObservationEvent"> => e.kind === "ObservationEvent");
const call = (name: string, args: Record<string, unknown> = {}) => ({ name, arguments: args });

/** The user's interrupt as POST /interrupt gives it: the PauseEvent stored, then the word to the run. */
const interrupt = async (conversationId: string, controller: AbortController) => {
  await fx.runs.requestPause(conversationId, { interrupt: true });
  controller.abort();
};

/**
 * A run whose endless pager (a page a second, the default 60 s deadline) has been asked its first
 * page and is still starting; `signal` names which of the run's signals `controller` aborts.
 */
const runPagerUntilAsked = async (signal: "interrupt" | "pause") => {
  const { conversationId, sandboxRef } = await conversationWithServer("Use the pager.");
  const controller = new AbortController();
  const run = runWith(conversationId, { mcpServers: { pager: pager(1) } }, {}, { [signal]: controller.signal });
  const settled = { done: false };
  void run.finally(() => {
    settled.done = true;
  });
  await waitFor(async () => settled.done || (await pagesAsked(sandboxRef)) > 0, {
    what: "the pager to be asked its first page",
    intervalMs: 200,
  });
  expect(settled.done).toBe(false);
  return { conversationId, sandboxRef, controller, run };
};

describe("an endless tools/list pager", () => {
  it(`is read ${MCP_MAX_LIST_PAGES} pages deep and left out, well before the start-up deadline; the rest are offered`, async () => {
    const { sandboxRef } = await conversationWithServer("Use the pager.");
    const began = performance.now();
    const set = await connectMcpServers(
      { mcpServers: { pager: pager(0), good: { url: remote.url } } },
      {
        sandboxes: fx.sandboxes,
        sandboxRef,
        workspaceDir: "/workspace/project",
        settings: loopbackAllowed,
        secrets: {},
        logger: fx.depsFor("openai").logger,
      },
    );
    const ms = performance.now() - began;
    try {
      expect(set.status).toEqual([
        {
          name: "pager",
          transport: "stdio",
          status: "failed",
          tools: 0,
          reason: `its tools/list named a next page ${MCP_MAX_LIST_PAGES} times and listed no tools`,
        },
        { name: "good", transport: "http", status: "ready", tools: 4 },
      ]);
      expect(await pagesAsked(sandboxRef)).toBe(MCP_MAX_LIST_PAGES);
      // The default deadline is 60 s: the page bound, not the deadline, ended it.
      expect(ms).toBeLessThan(30_000);
      console.info(`endless empty pager left out after ${MCP_MAX_LIST_PAGES} pages in ${Math.round(ms)} ms`);
    } finally {
      await set.close();
    }
    expect(await serverRunning(sandboxRef)).toBe(false);
  }, 60_000);

  it("a slow one is left out at MCP_STARTUP_TIMEOUT_MS and stopped; the run goes on with the others", async () => {
    const { conversationId, sandboxRef } = await conversationWithServer("Add 2 and 3.");
    const deadlineMs = 4_000;
    fx.llm.push({ toolCalls: [call("good__add", { a: 2, b: 3 })] }, { text: "It is 5." });
    const beganAt = Date.now();
    // 0.5 s a page: the page bound alone would hold it 25 s.
    const outcome = await runWith(
      conversationId,
      { mcpServers: { pager: pager(0.5), good: { url: remote.url } } },
      { MCP_STARTUP_TIMEOUT_MS: deadlineMs },
    );
    const events = await fx.events(conversationId);
    const statusAt = events.find((e) => e.kind === "ConversationStateUpdateEvent" && e.payload.key === "mcp_servers");
    const startupMs = Date.parse(statusAt?.timestamp ?? "") - beganAt;
    expect(outcome).toEqual({ outcome: "ended", status: "finished" });
    expect(serverStatus(events)).toEqual([
      {
        name: "pager",
        transport: "stdio",
        status: "failed",
        tools: 0,
        reason: `it did not start within MCP_STARTUP_TIMEOUT_MS (${deadlineMs} ms)`,
      },
      { name: "good", transport: "http", status: "ready", tools: 4 },
    ]);
    expect(observations(events).map((o) => textOfContent(o.payload.observation.content))).toEqual(["sum=5"]);
    // Its start-up ended at the deadline: the state update is stored within a moment of it.
    expect(startupMs).toBeGreaterThanOrEqual(deadlineMs);
    expect(startupMs).toBeLessThan(deadlineMs + 2_000);
    const pages = await pagesAsked(sandboxRef);
    expect(pages).toBeGreaterThan(0);
    expect(pages).toBeLessThan(MCP_MAX_LIST_PAGES);
    await waitFor(async () => !(await serverRunning(sandboxRef)), { what: "the pager to be stopped", intervalMs: 200 });
    console.info(`slow pager left out at the deadline: mcp_servers stored ${Math.round(startupMs)} ms into the run`);
  }, 60_000);

  it("an interrupt during start-up ends the run paused within 2 s, the server stopped", async () => {
    // The default deadline (60 s) and a page a second: only the interrupt can end it soon.
    const { conversationId, sandboxRef, controller, run } = await runPagerUntilAsked("interrupt");
    const began = performance.now();
    await interrupt(conversationId, controller);
    const outcome = await run;
    const ms = performance.now() - began;
    expect(outcome).toEqual({ outcome: "ended", status: "paused" });
    expect(ms).toBeLessThan(2_000);
    expect((await fx.conversation(conversationId)).executionStatus).toBe("paused");
    expect(serverStatus(await fx.events(conversationId))).toEqual([
      {
        name: "pager",
        transport: "stdio",
        status: "failed",
        tools: 0,
        reason: "the run was stopped while the server was starting",
      },
    ]);
    await waitFor(async () => !(await serverRunning(sandboxRef)), { what: "the pager to be stopped", intervalMs: 200 });
    console.info(`interrupt during MCP start-up: run paused ${Math.round(ms)} ms after it`);
  }, 60_000);

  it("a pause during start-up ends it too: the run pauses before its first step, the server stopped", async () => {
    const { conversationId, sandboxRef, controller, run } = await runPagerUntilAsked("pause");
    const asked = fx.llm.requests.length;
    // As POST /pause gives it: the PauseEvent stored, then the word to the run (a pause, not an interrupt).
    await fx.runs.requestPause(conversationId, {});
    controller.abort();
    // Well before the 60 s start-up deadline, which is all that would end it without the word.
    expect(await run).toEqual({ outcome: "ended", status: "paused" });
    expect(fx.llm.requests.length).toBe(asked);
    expect(serverStatus(await fx.events(conversationId))).toMatchObject([
      { name: "pager", status: "failed", reason: "the run was stopped while the server was starting" },
    ]);
    await waitFor(async () => !(await serverRunning(sandboxRef)), { what: "the pager to be stopped", intervalMs: 200 });
  }, 30_000);
});

describe("an MCP tool call", () => {
  it("is ended by an interrupt within 2 s, the run paused", async () => {
    const { conversationId } = await fx.newConversation({ message: "Hang." });
    const controller = new AbortController();
    fx.llm.push({ toolCalls: [call("slow__hang")] });
    const before = remote.requests.length;
    const run = runWith(
      conversationId,
      { mcpServers: { slow: { url: remote.url } } },
      {},
      { interrupt: controller.signal },
    );
    // The hang call is the fourth request (initialize, initialized, tools/list, tools/call).
    await waitFor(
      async () =>
        (await fx.events(conversationId)).some((e) => e.kind === "ActionEvent") && remote.requests.length >= before + 4,
      { what: "the hang call to reach the server" },
    );
    const began = performance.now();
    await interrupt(conversationId, controller);
    const outcome = await run;
    const ms = performance.now() - began;
    expect(outcome).toEqual({ outcome: "ended", status: "paused" });
    expect(ms).toBeLessThan(2_000);
    const [stopped] = observations(await fx.events(conversationId));
    expect(stopped?.payload.observation).toMatchObject({
      is_error: true,
      content: [{ type: "text", text: "The call of hang was stopped before it answered." }],
    });
  }, 60_000);
});

describe("a remote MCP server's answer", () => {
  it("is cut at MCP_MAX_RESPONSE_BYTES: the call fails and says so, the next connects again; an answer within it comes whole", async () => {
    const set = await connectMcpServers(
      { mcpServers: { remote: { url: remote.url } } },
      {
        sandboxes: fx.sandboxes,
        sandboxRef: null,
        workspaceDir: "/workspace/project",
        settings: { ...loopbackAllowed, MCP_MAX_RESPONSE_BYTES: 256 * 1024 },
        secrets: {},
        logger: fx.depsFor("openai").logger,
      },
    );
    try {
      const within = await set.call("remote__big", { bytes: 100_000 }, { maxOutputBytes: 1_000_000 });
      expect(within.isError).toBe(false);
      expect(within.text).toHaveLength(100_000);
      const past = await set.call("remote__big", { bytes: 2_000_000 }, { maxOutputBytes: 1_000_000 });
      expect(past.isError).toBe(true);
      expect(past.text).toContain("larger than 262144 bytes (MCP_MAX_RESPONSE_BYTES)");
      // The cut connection is opened again for the next call.
      const after = await set.call("remote__add", { a: 1, b: 2 }, { maxOutputBytes: 1_000 });
      expect([after.text, after.isError]).toEqual(["sum=3", false]);
    } finally {
      await set.close();
    }
  }, 60_000);
});
