import { randomUUID } from "node:crypto";
import { conversationsRepository, eventsRepository } from "@tern/db";
import { type ScriptedLlmServer, type ServiceProcess, startLlmServer, waitFor } from "@tern/testing";
import { startTestMcpServer, type TestMcpServer } from "@tern/testing/mcp-server";
import { sql } from "kysely";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createStartHarness, recordingClient, type StartHarness } from "./start-harness.ts";

/**
 * MCP settings end to end through real API and worker processes: mcp_config is set
 * and read back masked over the API, the worker's run calls the user's remote MCP server with the
 * header values it names (a user secret, and a literal value), and neither value appears in an
 * event, a log line, a stored row, or what the LLM is sent, even when the server echoes them back.
 */
let h: StartHarness;
let llm: ScriptedLlmServer;
let mcp: TestMcpServer;
let api: ServiceProcess;
let worker: ServiceProcess;

// The test's MCP server is on loopback, over http: the operator allows both here.
const mcpEnv = { MCP_ALLOW_PRIVATE: "true", MCP_ALLOW_HTTP: "true" };

beforeAll(async () => {
  h = await createStartHarness();
  [llm, mcp] = await Promise.all([startLlmServer(), startTestMcpServer()]);
  [api, worker] = await Promise.all([
    h.startApi({ env: mcpEnv }),
    h.startWorker({ ...llm.workerEnv("openai"), ...mcpEnv }),
  ]);
}, 120_000);
afterAll(async () => {
  await h?.close();
  await llm?.close();
  await mcp?.close();
});

const TOKEN_CANARY = `mcp-token-canary-${randomUUID()}`;
const LITERAL_CANARY = `mcp-literal-canary-${randomUUID()}`;

describe("MCP settings and secrets, end to end", () => {
  it("a secret or literal value in an MCP header reaches the server and appears nowhere else", async () => {
    const { key } = await h.newUser();
    const { answers, call } = recordingClient(api.url, key);
    const post = (path: string, body: unknown) => call(path, { method: "POST", body: JSON.stringify(body) });

    expect((await post("/api/v1/secrets", { name: "MCP_TOKEN", value: TOKEN_CANARY })).status).toBe(201);
    const config = {
      mcpServers: {
        remote: {
          url: mcp.url,
          headers: { Authorization: "Bearer <secret:MCP_TOKEN>", "X-Api-Key": LITERAL_CANARY },
          confirm: "always",
        },
      },
    };
    const set = await post("/api/v1/settings", { mcp_config: config });
    expect(set.status).toBe(200);
    // Read back: a reference as written, a literal value hidden.
    const shown = {
      mcpServers: {
        remote: {
          url: mcp.url,
          headers: { Authorization: "Bearer <secret:MCP_TOKEN>", "X-Api-Key": "**********" },
          confirm: "always",
        },
      },
    };
    expect(set.body.mcp_config).toEqual(shown);
    expect((await call("/api/v1/settings")).body.mcp_config).toEqual(shown);
    // What was read, written back as it is, keeps the stored values (the run below proves it).
    expect((await post("/api/v1/settings", { mcp_config: shown })).status).toBe(200);

    // Bad configs: 422 with the field named.
    const bad = async (mcp_config: unknown) => {
      const r = await post("/api/v1/settings", { mcp_config });
      return [r.status, r.body.code ?? r.body.error?.code, JSON.stringify(r.body)] as const;
    };
    expect((await bad({ mcpServers: { x: { url: "ftp://example.com/mcp" } } }))[0]).toBe(422);
    expect((await bad({ mcpServers: { a__b: { url: mcp.url } } }))[0]).toBe(422);
    expect((await bad({ mcpServers: { x: { url: mcp.url, headers: { K: "**********" } } } }))[0]).toBe(422);
    const many = Object.fromEntries(Array.from({ length: 21 }, (_, i) => [`s${i}`, { command: "true" }]));
    const tooMany = await bad({ mcpServers: many });
    expect(tooMany[0]).toBe(422);
    expect(tooMany[2]).toContain("at most 20 MCP servers");

    // Keyed by this attempt's own message: a retried test gets its own script, not what is left of another's.
    const tag = `who-am-i-${randomUUID().slice(0, 8)}`;
    llm.pushFor(tag, { toolCalls: [{ name: "remote__whoami", arguments: {} }] }, { text: "done" });
    const started = await post("/api/v1/app-conversations", {
      initial_message: {
        role: "user",
        content: [{ type: "text", text: `${tag}: who am I to the server?` }],
        run: true,
      },
    });
    expect(started.status).toBe(200);
    const { task } = await h.waitForTask(started.body.id);
    expect(task.status, task.detail ?? "").toBe("READY");
    const conversationId = task.appConversationId ?? "";
    const statusIs = (status: string) =>
      waitFor(
        async () => (await conversationsRepository(h.database.db).get(conversationId))?.executionStatus === status,
        { what: `the conversation to be ${status}`, timeoutMs: 60_000 },
      );
    // The server is marked always-confirm: its call waits for the user whatever the policy.
    await statusIs("waiting_for_confirmation");
    expect(
      (await post(`/api/v1/conversation/${conversationId}/events/respond_to_confirmation`, { accept: true })).status,
    ).toBe(200);
    await statusIs("finished");

    // Positive control: the server got both values, and echoed them into its result.
    const calls = mcp.requests.filter((r) => r.method === "POST");
    expect(calls.length).toBeGreaterThan(0);
    expect(calls.at(-1)?.headers.authorization).toBe(`Bearer ${TOKEN_CANARY}`);
    expect(calls.at(-1)?.headers["x-api-key"]).toBe(LITERAL_CANARY);
    const events = JSON.stringify(await eventsRepository(h.database.db).listAll(conversationId));
    // The whole header value is masked (the longest value first), the secret inside it with it.
    expect(events).toContain('\\"authorization\\":\\"<secret:mcp:remote:Authorization>\\"');
    expect(events).toContain('\\"x-api-key\\":\\"<secret:mcp:remote:X-Api-Key>\\"');

    // Every row of every table, as text: the masked config's reference shows the probe reads them.
    const tables = await sql<{ table_name: string }>`
      select table_name from information_schema.tables where table_schema = 'public' and table_type = 'BASE TABLE'`.execute(
      h.database.db,
    );
    let rows = "";
    for (const { table_name } of tables.rows) {
      const r = await sql<{ row: string }>`select t::text as row from ${sql.table(table_name)} t`.execute(
        h.database.db,
      );
      rows += r.rows.map((x) => x.row).join("\n");
    }
    expect(rows).toContain("Bearer <secret:MCP_TOKEN>");

    for (const [where, text] of [
      ["events", events],
      ["stored rows", rows],
      ["responses", answers.join("\n")],
      ["what the LLM was sent", JSON.stringify(llm.requests.map((r) => r.body))],
      ["API log", api.output()],
      ["worker log", worker.output()],
    ] as const) {
      expect(text, where).not.toContain(TOKEN_CANARY);
      expect(text, where).not.toContain(LITERAL_CANARY);
    }
    // The worker said which servers it connected (a log line per server).
    expect(worker.output()).toContain("MCP server connected");
  }, 180_000);
});
