import { toHexId } from "@tern/core";
import { conversationsRepository, sandboxesRepository } from "@tern/db";
import { createSandboxedConversation, scaled, testSandboxDriver, waitFor } from "@tern/testing";
import { sql } from "kysely";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestApi, type TestApi } from "./harness.ts";

/**
 * The agent server's bash, as a hostile tenant holding a key of a sandbox uses it, on a real
 * sandbox and worker with small bounds: commands in flight per sandbox (AGENT_BASH_MAX_IN_FLIGHT),
 * how long execute_bash_command holds its requests (AGENT_BASH_EXECUTE_MAX_S), the output stored
 * per command and per sandbox (AGENT_BASH_OUTPUT_MAX_CHARS, AGENT_BASH_SANDBOX_OUTPUT_MAX_CHARS),
 * the output leaving with its sandbox, and batch reads of at most 100 ids. Each refusal sits beside
 * what the same bound lets through.
 */
let api: TestApi;
let key: string;
let userId: string;
const IN_FLIGHT = 2;
const EXECUTE_MAX_S = 3;
const PER_COMMAND = 100_000;
const PER_SANDBOX = 250_000;

beforeAll(async () => {
  api = await startTestApi({
    worker: true,
    env: { AGENT_BASH_MAX_IN_FLIGHT: String(IN_FLIGHT), AGENT_BASH_EXECUTE_MAX_S: String(EXECUTE_MAX_S) },
    workerEnv: {
      AGENT_BASH_OUTPUT_MAX_CHARS: String(PER_COMMAND),
      AGENT_BASH_SANDBOX_OUTPUT_MAX_CHARS: String(PER_SANDBOX),
    },
  });
  ({ key, userId } = await api.newUser());
}, scaled(120_000));

afterAll(async () => api?.close());

const newSandbox = async (): Promise<string> => {
  const { conversationId } = await createSandboxedConversation({
    db: api.database.db,
    sandboxes: testSandboxDriver(),
    namespace: api.prefix,
    userId,
    tools: [],
  });
  return (await conversationsRepository(api.database.db).get(conversationId))?.sandboxId ?? "";
};

const call = (sandboxId: string, path: string, json?: unknown) =>
  fetch(`${api.url}/agent/${toHexId(sandboxId)}${path}`, {
    method: json === undefined ? "GET" : "POST",
    headers: { authorization: `Bearer ${key}`, ...(json === undefined ? {} : { "content-type": "application/json" }) },
    ...(json === undefined ? {} : { body: JSON.stringify(json) }),
  });

interface BashEvent {
  kind: string;
  id: string;
  command_id?: string;
  exit_code?: number | null;
  stdout?: string | null;
  stderr?: string | null;
}

/** Every bash event of the sandbox (a few pages at most here). */
const events = async (sandboxId: string): Promise<BashEvent[]> => {
  const all: BashEvent[] = [];
  let page: string | null = null;
  do {
    const res = await call(sandboxId, `/api/bash/bash_events/search?limit=100${page ? `&page_id=${page}` : ""}`);
    const body = (await res.json()) as { items: BashEvent[]; next_page_id: string | null };
    all.push(...body.items);
    page = body.next_page_id;
  } while (page);
  return all;
};

const outputChars = (es: BashEvent[], commandId?: string) =>
  es
    .filter((e) => e.kind === "BashOutput" && (!commandId || e.command_id === commandId))
    .reduce((n, e) => n + (e.stdout?.length ?? 0) + (e.stderr?.length ?? 0), 0);

describe("agent-server bash bounds", () => {
  it("refuses a command past AGENT_BASH_MAX_IN_FLIGHT in the sandbox (429), and takes one once a slot frees", {
    timeout: scaled(120_000),
  }, async () => {
    const sandboxId = await newSandbox();
    for (let i = 0; i < IN_FLIGHT; i++) {
      const started = await call(sandboxId, "/api/bash/start_bash_command", { command: "sleep 4", timeout: 30 });
      expect(started.status).toBe(200);
    }
    const refused = await call(sandboxId, "/api/bash/start_bash_command", { command: "true" });
    expect(refused.status, await refused.clone().text()).toBe(429);
    expect(((await refused.json()) as { detail: string }).detail).toMatch(/AGENT_BASH_MAX_IN_FLIGHT/);
    expect(refused.headers.get("retry-after")).not.toBeNull();
    // Another sandbox of the same user is not held up by this one's.
    const other = await newSandbox();
    expect((await call(other, "/api/bash/start_bash_command", { command: "true" })).status).toBe(200);
    await waitFor(
      async () => (await call(sandboxId, "/api/bash/start_bash_command", { command: "true" })).status === 200,
      { what: "a slot, once the sleeps ended" },
    );
  });

  it("answers execute_bash_command within AGENT_BASH_EXECUTE_MAX_S with what ran so far; the command goes on", {
    timeout: scaled(120_000),
  }, async () => {
    const sandboxId = await newSandbox();
    const asked = Date.now();
    const res = await call(sandboxId, "/api/bash/execute_bash_command", {
      command: "echo begun; sleep 8; echo ended",
      timeout: 600,
    });
    const took = (Date.now() - asked) / 1000;
    const body = (await res.json()) as BashEvent;
    expect(res.status).toBe(200);
    expect(took).toBeLessThan(EXECUTE_MAX_S + 3);
    expect(body).toMatchObject({ kind: "BashOutput", exit_code: null });
    expect(body.stdout).toContain("begun");
    // The command was not ended by the answer: its last output comes later, with its exit code.
    await waitFor(
      async () =>
        (await events(sandboxId)).some(
          (e) => e.kind === "BashOutput" && e.exit_code === 0 && e.stdout?.includes("ended"),
        ),
      { what: "the command's own end" },
    );
    // Its positive control: a quick command is answered whole, with its exit code.
    const quick = (await (
      await call(sandboxId, "/api/bash/execute_bash_command", { command: "echo hi" })
    ).json()) as BashEvent;
    expect(quick).toMatchObject({ exit_code: 0 });
    expect(quick.stdout).toContain("hi");
  });

  it("stores at most AGENT_BASH_OUTPUT_MAX_CHARS of a command's output, and says so", {
    timeout: scaled(120_000),
  }, async () => {
    const sandboxId = await newSandbox();
    const res = await call(sandboxId, "/api/bash/execute_bash_command", {
      command: `head -c ${PER_COMMAND * 3} /dev/zero | tr '\\0' a; echo`,
    });
    const last = (await res.json()) as BashEvent;
    expect(last.exit_code).toBe(0);
    const stored = outputChars(await events(sandboxId));
    expect(stored).toBeGreaterThan(PER_COMMAND / 2);
    expect(stored).toBeLessThanOrEqual(PER_COMMAND + 200);
    expect(last.stderr).toMatch(/dropped/);
  });

  it("keeps at most AGENT_BASH_SANDBOX_OUTPUT_MAX_CHARS of a sandbox's output: the oldest commands leave first", {
    timeout: scaled(180_000),
  }, async () => {
    const sandboxId = await newSandbox();
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) {
      const started = (await (
        await call(sandboxId, "/api/bash/start_bash_command", {
          command: `head -c ${PER_COMMAND - 1000} /dev/zero | tr '\\0' ${"abcde"[i]}`,
        })
      ).json()) as BashEvent;
      ids.push(started.id);
      await waitFor(
        async () => (await events(sandboxId)).some((e) => e.command_id === started.id && e.exit_code !== null),
        {
          what: `command ${i} ended`,
        },
      );
    }
    const all = await events(sandboxId);
    expect(outputChars(all)).toBeLessThanOrEqual(PER_SANDBOX);
    // The newest command is whole; the oldest is gone, command and outputs.
    expect(outputChars(all, ids[4])).toBe(PER_COMMAND - 1000);
    expect(all.some((e) => e.id === ids[0] || e.command_id === ids[0])).toBe(false);
  });

  it("purges a sandbox's bash events once the sandbox is gone", { timeout: scaled(120_000) }, async () => {
    const sandboxId = await newSandbox();
    expect((await call(sandboxId, "/api/bash/execute_bash_command", { command: "echo kept" })).status).toBe(200);
    const count = async () =>
      Number(
        (
          await sql<{ n: string }>`select count(*) as n from bash_events where sandbox_id = ${sandboxId}::uuid`.execute(
            api.database.db,
          )
        ).rows[0]?.n,
      );
    expect(await count()).toBeGreaterThan(0);
    await sandboxesRepository(api.database.db).update(sandboxId, { status: "MISSING" });
    expect(await count()).toBe(0);
  });

  it("reads at most 100 bash events by id in one request (422 past it)", { timeout: scaled(60_000) }, async () => {
    const sandboxId = await newSandbox();
    const ids = (n: number) => Array.from({ length: n }, (_, i) => `event_ids=${i.toString(16).padStart(32, "0")}`);
    const hundred = await call(sandboxId, `/api/bash/bash_events/?${ids(100).join("&")}`);
    expect(hundred.status).toBe(200);
    expect((await hundred.json()) as unknown[]).toHaveLength(100);
    expect((await call(sandboxId, `/api/bash/bash_events/?${ids(101).join("&")}`)).status).toBe(422);
  });
});
