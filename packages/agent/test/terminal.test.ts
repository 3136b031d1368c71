import { randomUUID } from "node:crypto";
import { type MessageContent, type StoredEvent, type StoredEventOf, textOfContent } from "@tern/core";
import { fixtureWorkspaceDir as workspaceDir } from "@tern/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type AgentRunDeps, runAgent } from "../src/loop.ts";
import { createRunFixture, type RunFixture } from "./run-fixture.ts";

/**
 * The `terminal` tool: one live shell per conversation in its sandbox (tmux), driven by the agent
 * loop through the scripted LLM, on a real sandbox.
 */
let fx: RunFixture;

beforeAll(async () => {
  fx = await createRunFixture();
});

afterAll(async () => {
  await fx?.close();
});

const terminal = (args: Record<string, unknown>) => ({ toolCalls: [{ name: "terminal", arguments: args }] });

const observations = (events: StoredEvent[]) =>
  events
    .filter((e): e is StoredEventOf<"ObservationEvent"> => e.kind === "ObservationEvent")
    .map((e) => e.payload.observation);

const textOf = (o: { content: MessageContent[] } | undefined) => textOfContent(o?.content ?? []);

/** One run of the loop with these settings on top of the fixture's (openai). */
const runWith = async (conversationId: string, extra: Partial<AgentRunDeps> = {}, settings = {}) => {
  const deps = fx.depsFor("openai");
  const outcome = await runAgent(
    { ...deps, ...extra, settings: { ...deps.settings, ...settings } },
    conversationId,
    randomUUID(),
  );
  return { outcome, observations: observations(await fx.events(conversationId)) };
};

describe("the terminal: one live shell per conversation", () => {
  it("keeps the shell's state between commands: exports, functions, aliases, the directory and a virtualenv", async () => {
    const { conversationId } = await fx.newConversation({ message: "Set things up." });
    fx.llm.push(
      terminal({ command: "export X=1" }),
      terminal({ command: "echo X=$X" }),
      terminal({ command: "greet() { echo hello-$1; }; alias ll='echo aliased'; cd /tmp" }),
      terminal({ command: "greet ada; ll; pwd" }),
      terminal({ command: "python3 -m venv --without-pip /tmp/venv && source /tmp/venv/bin/activate" }),
      terminal({ command: 'python -c "import sys; print(sys.prefix)"' }),
      { text: "done" },
    );
    const { outcome, observations: obs } = await runWith(conversationId);
    expect(outcome).toEqual({ outcome: "ended", status: "finished" });
    expect(obs).toHaveLength(6);
    expect(textOf(obs[1])).toMatch(/^X=1\n\[The command completed with exit code 0\.\]/);
    expect(textOf(obs[3])).toMatch(/^hello-ada\naliased\n\/tmp\n/);
    expect(obs[4]?.exit_code).toBe(0);
    expect(textOf(obs[5])).toMatch(/^\/tmp\/venv\n/);
    expect(textOf(obs[5])).toContain("[Python interpreter: /tmp/venv/bin/python]");
    expect(textOf(obs[5])).toContain("[Current working directory: /tmp]");
  });

  it("keeps a background server running: curl reaches it two commands later", async () => {
    const { conversationId } = await fx.newConversation({ message: "Serve." });
    fx.llm.push(
      terminal({ command: `cd ${workspaceDir} && echo served-page > page.txt` }),
      terminal({ command: "python3 -m http.server 8731 --bind 127.0.0.1 > /tmp/http.log 2>&1 &" }),
      terminal({ command: "echo between" }),
      terminal({ command: "for i in $(seq 50); do curl -sf http://127.0.0.1:8731/page.txt && break; sleep 0.2; done" }),
      { text: "done" },
    );
    const { observations: obs } = await runWith(conversationId);
    expect(obs).toHaveLength(4);
    expect(textOf(obs[3])).toMatch(/^served-page\n\[The command completed with exit code 0\.\]/);
  });

  it("answers a prompt with is_input, and refuses a new command while one runs", async () => {
    const { conversationId } = await fx.newConversation({ message: "Answer it." });
    fx.llm.push(
      terminal({ command: 'read -p "Your name? " NAME && echo "Hello, $NAME"' }),
      terminal({ command: "echo not now" }),
      terminal({ command: "Ada", is_input: true }),
      terminal({ command: "echo now" }),
      { text: "done" },
    );
    const { observations: obs } = await runWith(conversationId, {}, { TERMINAL_NO_CHANGE_TIMEOUT_SECONDS: 2 });
    expect(obs[0]).toMatchObject({ exit_code: -1, status: "no_change" });
    expect(textOf(obs[0])).toMatch(/^Your name\?/);
    expect(textOf(obs[0])).toMatch(/no new output after 2 seconds/);
    expect(obs[1]).toMatchObject({ exit_code: -1, status: "refused" });
    expect(textOf(obs[1])).toMatch(/Your command "echo not now" is NOT executed/);
    expect(obs[2]).toMatchObject({ exit_code: 0, status: "completed" });
    expect(textOf(obs[2])).toMatch(/^\[Below is the output of the previous command.\]\nHello, Ada\n/);
    expect(textOf(obs[3])).toMatch(/^now\n/);
  });

  // The quiet period is 30 s by default (OpenHands' too); 4 s here proves the same behaviour in a seventh
  // of the time: a command quiet for longer comes back early, unkilled, and is polled to its end.
  it("returns a quiet sleep early with -1, polls it to its end; C-c stops a loop; reset starts a fresh shell", async () => {
    const { conversationId } = await fx.newConversation({ message: "Wait, then stop." });
    fx.llm.push(
      terminal({ command: "export KEPT=yes; sleep 7; echo slept" }),
      terminal({ command: "" }),
      terminal({ command: "while true; do echo tick; sleep 1; done", timeout: 3 }),
      terminal({ command: "C-c", is_input: true }),
      terminal({ command: "echo after-$KEPT" }),
      // biome-ignore lint/suspicious/noTemplateCurlyInString: a shell parameter expansion, not a template.
      terminal({ command: "echo reset-${KEPT:-gone}", reset: true }),
      { text: "done" },
    );
    const began = Date.now();
    const { observations: obs } = await runWith(conversationId, {}, { TERMINAL_NO_CHANGE_TIMEOUT_SECONDS: 4 });
    const took = Date.now() - began;
    // No hard kill: the first call came back after 4 s without output, the second (a poll begun after
    // 4 s, so it outlasts the 7 s sleep) at the sleep's end.
    expect(obs[0]).toMatchObject({ exit_code: -1, status: "no_change" });
    expect(textOf(obs[0])).toMatch(/no new output after 4 seconds/);
    expect(obs[1]).toMatchObject({ exit_code: 0, status: "completed" });
    expect(textOf(obs[1])).toMatch(/slept/);
    expect(took).toBeGreaterThanOrEqual(7_000);
    expect(obs[2]).toMatchObject({ exit_code: -1, status: "hard_timeout", timed_out: true });
    expect(textOf(obs[2])).toMatch(/tick/);
    expect(obs[3]).toMatchObject({ exit_code: 130, status: "completed" });
    expect(textOf(obs[3])).toMatch(/CTRL\+C was sent/);
    expect(textOf(obs[4])).toMatch(/^after-yes\n/);
    expect(textOf(obs[5])).toMatch(/^Terminal session has been reset/);
    expect(textOf(obs[5])).toMatch(/reset-gone/);
  }, 120_000);

  it("keeps the shell across a pause and resume of the sandbox, between two runs", async () => {
    const { conversationId, sandboxRef } = await fx.newConversation({ message: "Remember this." });
    fx.llm.push(terminal({ command: "export KEPT=through-pause; cd /tmp" }), { text: "kept" });
    await runWith(conversationId);
    await fx.sandboxes.pause(sandboxRef);
    await fx.sandboxes.resume(sandboxRef);
    await fx.sayToAgent(conversationId, "What was it?");
    fx.llm.push(terminal({ command: 'echo "$KEPT in $PWD"' }), { text: "it was kept" });
    const { observations: obs } = await runWith(conversationId);
    expect(textOf(obs[1])).toMatch(/^through-pause in \/tmp\n/);
  });

  it("gives the shell the user's secrets, masked in what is stored", async () => {
    const { conversationId } = await fx.newConversation({ message: "Use the token." });
    fx.llm.push(terminal({ command: 'echo "token=$API_TOKEN"' }), { text: "done" });
    const { observations: obs } = await runWith(conversationId, {
      runContext: async () => ({
        secrets: { API_TOKEN: "tok-9f8e7d6c5b" },
        llm: null,
        maxIterations: null,
        maxBudgetPerTask: null,
      }),
    });
    expect(textOf(obs[0])).toMatch(/^token=<secret:API_TOKEN>\n/);
    expect(JSON.stringify(await fx.events(conversationId))).not.toContain("tok-9f8e7d6c5b");
  });
});
