import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import { type ScriptedLlmServer, scaled, startLlmServer, startStack, type TestStack } from "@tern/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

/**
 * OpenHands' clients, as fixtures/openhands/cloud_workspace_client.py replays them (what
 * OpenHandsCloudWorkspace, RemoteWorkspace and RemoteConversation send, in their order, with their
 * headers; Python's standard library and `requests`): a sandbox made through the app server, its
 * agent server found in `exposed_urls`, commands, a file up and down, git changes, a conversation
 * with an LLM the client names (our scripted server), followed on its socket to the end, and the
 * sandbox deleted.
 */

const CLIENT = fileURLToPath(new URL("./fixtures/openhands/cloud_workspace_client.py", import.meta.url));
const MARKER = "client-run-7f3a";

let llm: ScriptedLlmServer;
let stack: TestStack;

beforeAll(async () => {
  llm = await startLlmServer();
  // The deployment has no LLM of its own: the client names one, a user's own endpoint, which this
  // deployment allows on loopback (API and worker both check it).
  const allow = { LLM_USER_BASE_URLS: llm.url };
  stack = await startStack({ api: allow, worker: allow });
}, scaled(180_000));

afterAll(async () => {
  await stack?.close();
  await llm?.close();
});

const TIMEOUT_MS = scaled(300_000);

/** The client, stopped at `deadlineMs` if still running, so a stuck step fails showing how far it got. */
const runClient = (args: string[], deadlineMs: number) =>
  new Promise<{ code: number | null; lines: Record<string, unknown>[]; output: string }>((resolve) => {
    const child = spawn("python3", [CLIENT, ...args], {
      stdio: ["ignore", "pipe", "pipe"],
      // Each step's own wait, well inside the test's.
      env: { ...process.env, CLIENT_TIMEOUT_SECONDS: String(Math.round(deadlineMs / 4000)) },
    });
    let output = "";
    const deadline = setTimeout(() => {
      output += `\n[test] client still running after ${deadlineMs} ms: stopped\n`;
      child.kill("SIGTERM");
    }, deadlineMs);
    child.on("exit", () => clearTimeout(deadline));
    child.stdout.on("data", (d) => {
      output += d;
    });
    child.stderr.on("data", (d) => {
      output += d;
    });
    child.on("exit", (code) => {
      const lines = output
        .split("\n")
        .filter((l) => l.startsWith("{"))
        .map((l) => JSON.parse(l) as Record<string, unknown>);
      resolve({ code, lines, output });
    });
  });

describe("OpenHands' SDK clients against the agent server", () => {
  it("run a workspace and a conversation from sandbox creation to deletion", { timeout: TIMEOUT_MS }, async () => {
    const { key } = await stack.newUser();
    // The agent's run: one terminal call, then its answer.
    llm.pushFor(
      MARKER,
      { toolCalls: [{ name: "terminal", arguments: { command: "echo agent-was-here", security_risk: "LOW" } }] },
      { text: "hello from the scripted model" },
    );
    const { code, lines, output } = await runClient(
      [
        "--url",
        stack.api.url,
        "--api-key",
        key,
        "--llm-base-url",
        llm.openaiBaseUrl,
        "--llm-model",
        "gpt-4o",
        "--marker",
        MARKER,
      ],
      TIMEOUT_MS - 15_000,
    );
    expect(code, output).toBe(0);
    const steps = lines.map((l) => l.step);
    expect(steps).toEqual([
      "sandbox_created",
      "agent_server",
      "commands",
      "files",
      "git",
      "conversation",
      "sandbox_deleted",
    ]);
    const conversation = lines.find((l) => l.step === "conversation") as { events: string[]; final: string };
    expect(conversation.events).toContain("ActionEvent");
    expect(conversation.events).toContain("ObservationEvent");
    expect(conversation.final).toContain("hello from the scripted model");
    // The client's LLM was the one called, with the key the client gave.
    const calls = llm.requestsFor(MARKER);
    expect(calls.length).toBe(2);
    expect(String(calls[0]?.headers.authorization)).toBe("Bearer sk-client-named");
  });
});
