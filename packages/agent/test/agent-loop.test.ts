import { randomUUID } from "node:crypto";
import { type EventKind, type StoredEvent, type StoredEventOf, textOfContent } from "@tern/core";
import { kindsOf, statusChanges, fixtureWorkspaceDir as workspaceDir } from "@tern/testing";
import { sql } from "kysely";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { LlmProvider } from "../src/llm/types.ts";
import { runAgent } from "../src/loop.ts";
import { createRunFixture, type RunFixture } from "./run-fixture.ts";

/**
 * The agent loop itself (runAgent), run to its end against real Postgres, a real sandbox and the
 * scripted LLM. What the worker adds around it (a job per run, delays, retries, kills) is tested
 * in apps/worker/test.
 */
let fx: RunFixture;

beforeAll(async () => {
  fx = await createRunFixture();
});

afterAll(async () => {
  await fx?.close();
});

const call = (name: string, args: string | Record<string, unknown>) => ({ name, arguments: args });

const of = <K extends EventKind>(events: StoredEvent[], kind: K) =>
  events.filter((e): e is StoredEventOf<K> => e.kind === kind);

/** The messages the model was sent in the last request, as plain JSON text (either provider). */
const lastRequestText = () => JSON.stringify(fx.llm.requests.at(-1)?.body ?? {});

describe.each<LlmProvider>(["openai", "anthropic"])("agent loop with %s", (provider) => {
  it("reads a repository file with a tool call and answers with its content", async () => {
    const { conversationId } = await fx.newConversation({
      files: { "README.md": "The project codename is BLUE-HERON.\n" },
      message: "What is the codename in the README?",
    });
    const before = fx.llm.requests.length;
    fx.llm.push(
      {
        text: "Let me read it.",
        toolCalls: [call("file_editor", { command: "view", path: `${workspaceDir}/README.md` })],
      },
      { text: "The codename is BLUE-HERON.", usage: { input: 100, output: 7 } },
    );
    const { conversation } = await fx.run(conversationId, provider);
    expect(conversation.executionStatus).toBe("finished");

    const events = await fx.events(conversationId);
    expect(kindsOf(events)).toEqual([
      "SystemPromptEvent",
      "MessageEvent",
      "ActionEvent",
      "ObservationEvent",
      "MessageEvent",
    ]);
    expect(statusChanges(events)).toEqual(["running", "finished"]);
    const [action] = of(events, "ActionEvent");
    const [observation] = of(events, "ObservationEvent");
    expect(action?.payload).toMatchObject({
      tool_name: "file_editor",
      thought: [{ type: "text", text: "Let me read it." }],
      action: { kind: "FileEditorAction", command: "view", path: `${workspaceDir}/README.md` },
    });
    expect(observation?.payload).toMatchObject({
      tool_name: "file_editor",
      tool_call_id: action?.payload.tool_call_id,
      action_id: action?.id,
    });
    expect(JSON.stringify(observation?.payload.observation)).toContain("BLUE-HERON");
    expect(events.at(-2)?.payload).toMatchObject({
      llm_message: { role: "assistant", content: [{ type: "text", text: "The codename is BLUE-HERON." }] },
    });
    expect(events.at(-2)?.source).toBe("agent");

    // The model got the system prompt, the tools, and the file's content back as the tool result.
    expect(fx.llm.requests.length - before).toBe(2);
    const second = fx.llm.requests.at(-1);
    expect(second?.provider).toBe(provider);
    expect(second?.stream).toBe(true);
    expect(lastRequestText()).toContain("You are the test agent.");
    expect(lastRequestText()).toContain("BLUE-HERON");
    expect(lastRequestText()).toContain(String(action?.payload.tool_call_id));
    const toolNames = ((second?.body.tools ?? []) as Record<string, unknown>[]).map(
      (t) => (t.function as { name?: string } | undefined)?.name ?? t.name,
    );
    expect(toolNames).toEqual([
      "terminal",
      "file_editor",
      "think",
      "finish",
      "git_push",
      "create_pull_request",
      "task_tracker",
      "invoke_skill",
    ]);

    expect(conversation.metrics).toMatchObject({
      llm_calls: 2,
      prompt_tokens: 110,
      completion_tokens: 12,
      total_tokens: 122,
    });
  });

  it("edits a file with file_editor, and the edit is in the sandbox; finish ends the run", async () => {
    const { conversationId, sandboxRef } = await fx.newConversation({
      files: { "app.py": "def greet():\n    return 'hello'\n" },
      message: "Make greet return 'bonjour'.",
    });
    fx.llm.push(
      {
        toolCalls: [
          call("file_editor", {
            command: "str_replace",
            path: `${workspaceDir}/app.py`,
            old_str: "return 'hello'",
            new_str: "return 'bonjour'",
          }),
        ],
      },
      { toolCalls: [call("finish", { message: "greet now says bonjour" })] },
    );
    const { conversation } = await fx.run(conversationId, provider);
    expect(conversation.executionStatus).toBe("finished");
    expect(await fx.exec(sandboxRef, `cat ${workspaceDir}/app.py`)).toBe("def greet():\n    return 'bonjour'\n");
    const events = await fx.events(conversationId);
    expect(kindsOf(events).slice(2)).toEqual(["ActionEvent", "ObservationEvent", "ActionEvent", "ObservationEvent"]);
    const [edit, finish] = of(events, "ObservationEvent");
    expect(edit?.payload.observation).toMatchObject({
      kind: "FileEditorObservation",
      command: "str_replace",
      is_error: false,
    });
    expect(finish?.payload).toMatchObject({
      tool_name: "finish",
      observation: { kind: "FinishObservation", content: [{ type: "text", text: "greet now says bonjour" }] },
    });
    expect(statusChanges(events)).toEqual(["running", "finished"]);
  });

  it("turns a malformed tool call into an AgentErrorEvent the model reads, then carries on", async () => {
    const { conversationId } = await fx.newConversation({ message: "List the files." });
    const malformed =
      provider === "openai"
        ? call("terminal", '{"command": "ls -la"') // cut JSON: only OpenAI's wire can carry it
        : call("terminal", { cmd: "ls -la" }); // no `command`
    fx.llm.push(
      { toolCalls: [malformed, call("no_such_tool", { x: 1 })] },
      { toolCalls: [call("terminal", { command: "echo listed" })] },
      { text: "Done." },
    );
    const { conversation } = await fx.run(conversationId, provider);
    expect(conversation.executionStatus).toBe("finished");
    const events = await fx.events(conversationId);
    const errors = of(events, "AgentErrorEvent");
    expect(errors).toHaveLength(2);
    expect(errors[0]?.payload).toMatchObject({ tool_name: "terminal" });
    expect(String(errors[0]?.payload.error)).toMatch(provider === "openai" ? /not valid JSON/ : /command/);
    expect(String(errors[1]?.payload.error)).toMatch(/Unknown tool "no_such_tool"/);
    // The second request carried both errors back as tool results of the calls.
    const second = JSON.stringify(fx.llm.requests.at(-2)?.body);
    expect(second).toContain(String(errors[0]?.payload.tool_call_id));
    expect(second).toContain("Unknown tool");
    expect(JSON.stringify(of(events, "ObservationEvent")[0]?.payload.observation)).toContain("listed");
  });

  it("retries an LLM that answers 500 twice, then 200", async () => {
    const { conversationId } = await fx.newConversation({ message: "Say hi." });
    const before = fx.llm.requests.length;
    fx.llm.push({ error: { status: 500 } }, { error: { status: 500 } }, { text: "hi" });
    const { conversation } = await fx.run(conversationId, provider);
    expect(conversation.executionStatus).toBe("finished");
    expect(fx.llm.requests.length - before).toBe(3);
    const events = await fx.events(conversationId);
    expect(kindsOf(events)).toEqual(["SystemPromptEvent", "MessageEvent", "MessageEvent"]);
    expect(conversation.metrics.llm_calls).toBe(1);
  });

  it("retries a rate limit (429) with backoff", async () => {
    const { conversationId } = await fx.newConversation({ message: "Say hi." });
    const before = fx.llm.requests.length;
    fx.llm.push({ error: { status: 429, message: "slow down" } }, { text: "hi" });
    const { conversation } = await fx.run(conversationId, provider);
    expect(conversation.executionStatus).toBe("finished");
    expect(fx.llm.requests.length - before).toBe(2);
  });

  it("ends in error with an AgentErrorEvent when the LLM keeps failing", async () => {
    const { conversationId } = await fx.newConversation({ message: "Say hi." });
    fx.llm.push({ error: { status: 401, message: "bad key" } });
    const { conversation } = await fx.run(conversationId, provider);
    expect(conversation.executionStatus).toBe("error");
    const events = await fx.events(conversationId);
    expect(String(of(events, "AgentErrorEvent")[0]?.payload.error)).toMatch(/bad key/);
    expect(statusChanges(events)).toEqual(["running", "error"]);
  });

  it("stops at MAX_ITERATIONS as OpenHands does (MaxIterationsReached), and a follow-up continues", async () => {
    const { conversationId } = await fx.newConversation({ message: "Count forever." });
    fx.llm.push(
      { toolCalls: [call("terminal", { command: "echo 1" })] },
      { toolCalls: [call("terminal", { command: "echo 2" })] },
      { toolCalls: [call("terminal", { command: "echo 3" })] },
    );
    const before = fx.llm.requests.length;
    const { conversation } = await fx.run(conversationId, provider, 3);
    expect(conversation.executionStatus).toBe("error");
    expect(fx.llm.requests.length - before).toBe(3);
    const events = await fx.events(conversationId);
    expect(of(events, "ActionEvent")).toHaveLength(3);
    expect(of(events, "ObservationEvent")).toHaveLength(3);
    // OpenHands' clients wait for this event: from the environment, with its code.
    const [limit] = of(events, "ConversationErrorEvent");
    expect(limit?.source).toBe("environment");
    expect(limit?.payload).toMatchObject({ code: "MaxIterationsReached" });
    expect(String(limit?.payload.detail)).toMatch(/maximum iterations limit \(3\)/);
    expect(of(events, "AgentErrorEvent")).toHaveLength(0);
    expect(events.at(-1)?.payload).toEqual({ key: "execution_status", value: "error" });
    // A follow-up continues the task in a run with a count of its own.
    await fx.sayToAgent(conversationId, "Go on.");
    fx.llm.push({ toolCalls: [call("terminal", { command: "echo 4" })] }, { text: "Counted to 4." });
    const again = await fx.run(conversationId, provider, 3);
    expect(again.conversation.executionStatus).toBe("finished");
    expect(of(await fx.events(conversationId), "ObservationEvent")).toHaveLength(4);
  });

  it("nudges an empty reply, twice at most, before the run ends", async () => {
    const { conversationId } = await fx.newConversation({ message: "Say hello." });
    const nudges = (events: StoredEvent[]) =>
      events.filter((e) => e.kind === "MessageEvent" && e.source === "environment");
    fx.llm.push({ text: "" }, { text: "Hello." });
    expect((await fx.run(conversationId, provider)).conversation.executionStatus).toBe("finished");
    expect(nudges(await fx.events(conversationId))).toHaveLength(1);
    await fx.sayToAgent(conversationId, "Again.");
    fx.llm.push({ text: "" }, { text: "" }, { text: "" }, { text: "never asked" });
    expect((await fx.run(conversationId, provider)).conversation.executionStatus).toBe("error");
    expect(fx.llm.remaining()).toBe(1);
    const events = await fx.events(conversationId);
    expect(nudges(events)).toHaveLength(3);
    expect(String(of(events, "AgentErrorEvent").at(-1)?.payload.error)).toMatch(/nothing .* 3 times in a row/);
    fx.llm.clear();
  });

  it("detects a stuck loop: the same action with the same result four times", async () => {
    const { conversationId } = await fx.newConversation({ message: "Check the status." });
    for (let i = 0; i < 4; i++) fx.llm.push({ toolCalls: [call("terminal", { command: "echo unchanged" })] });
    fx.llm.push({ text: "never asked" });
    const { conversation } = await fx.run(conversationId, provider);
    expect(conversation.executionStatus).toBe("stuck");
    expect(fx.llm.remaining()).toBe(1);
    const events = await fx.events(conversationId);
    expect(of(events, "ActionEvent")).toHaveLength(4);
    expect(String(of(events, "AgentErrorEvent")[0]?.payload.error)).toMatch(
      /stuck pattern: repeated_action_observation/,
    );
    expect(statusChanges(events)).toEqual(["running", "stuck"]);
    fx.llm.clear();
  });

  it("answers a follow-up message with the whole history", async () => {
    const { conversationId } = await fx.newConversation({ message: "Remember the number 41." });
    fx.llm.push({ text: "Noted: 41." });
    expect((await fx.run(conversationId, provider)).conversation.executionStatus).toBe("finished");
    await fx.sayToAgent(conversationId, "Add one to it.");
    fx.llm.push({ text: "42." });
    const { conversation } = await fx.run(conversationId, provider);
    expect(conversation.executionStatus).toBe("finished");
    const sent = lastRequestText();
    expect(sent.indexOf("Remember the number 41.")).toBeLessThan(sent.indexOf("Noted: 41."));
    expect(sent.indexOf("Noted: 41.")).toBeLessThan(sent.indexOf("Add one to it."));
    const events = await fx.events(conversationId);
    expect(kindsOf(events)).toEqual([
      "SystemPromptEvent",
      "MessageEvent",
      "MessageEvent",
      "MessageEvent",
      "MessageEvent",
    ]);
    expect(statusChanges(events)).toEqual(["running", "finished", "running", "finished"]);
  });

  it("pauses between steps when asked, and a new run continues where it stopped", async () => {
    const { conversationId, sandboxRef } = await fx.newConversation({ message: "Write two lines." });
    let release: () => void = () => undefined;
    const held = new Promise<void>((r) => {
      release = r;
    });
    let inFlight: () => void = () => undefined;
    const reached = new Promise<void>((r) => {
      inFlight = r;
    });
    fx.llm.push(
      { toolCalls: [call("terminal", { command: "echo one >> lines.txt" })] },
      {
        toolCalls: [call("terminal", { command: "echo two >> lines.txt" })],
        before: async () => {
          inFlight();
          await held;
        },
      },
    );
    const runId = randomUUID();
    const running = runAgent(fx.depsFor(provider), conversationId, runId);
    await reached; // the second LLM call is in flight
    expect((await fx.conversation(conversationId)).executionStatus).toBe("running");
    expect(await fx.runs.requestPause(conversationId)).toEqual({ activeRunId: runId });
    release();
    expect(await running).toEqual({ outcome: "ended", status: "paused" });
    const paused = await fx.conversation(conversationId);
    expect(paused.executionStatus).toBe("paused");
    // The step in flight completed (its call was already decided), then the loop stopped.
    expect(await fx.exec(sandboxRef, `cat ${workspaceDir}/lines.txt`)).toBe("one\ntwo\n");
    const before = fx.llm.requests.length;
    fx.llm.push({ text: "Both lines written." });
    const { conversation } = await fx.run(conversationId, provider);
    expect(conversation.executionStatus).toBe("finished");
    expect(fx.llm.requests.length - before).toBe(1);
    const events = await fx.events(conversationId);
    expect(statusChanges(events)).toEqual(["running", "paused", "running", "finished"]);
    expect(kindsOf(events)).toEqual([
      "SystemPromptEvent",
      "MessageEvent",
      "ActionEvent",
      "ObservationEvent",
      "PauseEvent",
      "ActionEvent",
      "ObservationEvent",
      "MessageEvent",
    ]);
  });

  it("adds a triggered skill to the user message that names its trigger", async () => {
    const { conversationId } = await fx.newConversation({
      message: "How do we Deploy this?",
      skills: [
        {
          name: "deploying",
          triggers: ["deploy"],
          content: "Run make ship-it to deploy.",
          source: ".openhands/skills/deploy.md",
        },
        { name: "testing", triggers: ["pytest"], content: "Use pytest -q.", source: ".openhands/skills/test.md" },
      ],
    });
    fx.llm.push({ text: "Use make ship-it." });
    await fx.run(conversationId, provider);
    const sent = lastRequestText();
    expect(sent).toContain("Run make ship-it to deploy.");
    expect(sent).not.toContain("Use pytest -q.");
  });
});

describe("agent runs, whatever the provider", () => {
  it("writes what a step produces together: a response's calls with their quick results, results before a slow call", async () => {
    const { conversationId } = await fx.newConversation({
      files: { "README.md": "Project STEP.\n" },
      message: "Look around.",
    });
    const readme = { command: "view", path: `${workspaceDir}/README.md` };
    fx.llm.push(
      {
        toolCalls: [
          call("think", { thought: "First the README, then a command." }),
          call("file_editor", readme),
          call("terminal", { command: "echo hello" }),
          call("file_editor", readme),
        ],
      },
      { text: "Done." },
    );
    const { conversation } = await fx.run(conversationId, "openai");
    expect(conversation.executionStatus).toBe("finished");
    // Events written by one transaction share its id (xmin): the writes, in order, from the run's start.
    const rows = await fx.database.db
      .selectFrom("events")
      .select(["seq", "kind", "payload", sql<string>`xmin::text`.as("tx")])
      .where("conversation_id", "=", conversationId)
      .orderBy("seq")
      .execute();
    const label = (r: (typeof rows)[number]) => {
      const p = r.payload as { tool_name?: string; key?: string; value?: string };
      return p.tool_name ? `${r.kind}:${p.tool_name}` : p.key ? `${p.key}:${p.value}` : r.kind;
    };
    const writes: string[][] = [];
    rows.forEach((r, i) => {
      if (i > 0 && rows[i - 1]?.tx === r.tx) writes.at(-1)?.push(label(r));
      else writes.push([label(r)]);
    });
    expect(writes.slice(-5)).toEqual([
      // The response, with think's result (no time) and its usage; nothing has run yet.
      [
        "ActionEvent:think",
        "ActionEvent:file_editor",
        "ActionEvent:terminal",
        "ActionEvent:file_editor",
        "ObservationEvent:think",
      ],
      // Shown before the command runs; then the command's result and the quick view after it.
      ["ObservationEvent:file_editor"],
      ["ObservationEvent:terminal", "ObservationEvent:file_editor"],
      ["MessageEvent"],
      ["execution_status:finished"],
    ]);
    expect(conversation.metrics).toMatchObject({ llm_calls: 2 });
  });

  it("ends at once with an AgentErrorEvent saying how to configure an LLM when none is", async () => {
    const { conversationId } = await fx.newConversation({ message: "Hello?" });
    const before = fx.llm.requests.length;
    const { conversation } = await fx.run(conversationId, "none");
    expect(conversation.executionStatus).toBe("error");
    expect(fx.llm.requests.length).toBe(before);
    const events = await fx.events(conversationId);
    const error = String(of(events, "AgentErrorEvent")[0]?.payload.error);
    expect(error).toMatch(/LLM_PROVIDER/);
    expect(error).toMatch(/LLM_MODEL/);
    expect(error).toMatch(/LLM_API_KEY/);
    expect(statusChanges(events)).toEqual(["running", "error"]);
  });

  it("never sends the operator's key to another provider: a prefixed llm_model of another provider ends the run", async () => {
    const { conversationId } = await fx.newConversation({ message: "Hi", llmModel: "anthropic/claude-special" });
    const before = fx.llm.requests.length;
    const { conversation } = await fx.run(conversationId, "openai");
    expect(conversation.executionStatus).toBe("error");
    expect(fx.llm.requests.length).toBe(before);
    const error = String(of(await fx.events(conversationId), "AgentErrorEvent")[0]?.payload.error);
    expect(error).toMatch(/anthropic model; this deployment's LLM is openai/);
  });

  it("returns at a call's time limit with the command still running, and cuts long output naming the whole", async () => {
    const { conversationId } = await fx.newConversation({ message: "Run things." });
    fx.llm.push(
      { toolCalls: [call("terminal", { command: "cd /tmp" })] },
      { toolCalls: [call("terminal", { command: "sleep 30", timeout: 1 })] },
      { toolCalls: [call("terminal", { command: "C-c", is_input: true })] },
      { toolCalls: [call("terminal", { command: "pwd; head -c 100000 /dev/zero | tr '\\0' a; echo; echo END" })] },
      { text: "ok" },
    );
    await fx.run(conversationId, "openai");
    const observations = of(await fx.events(conversationId), "ObservationEvent");
    expect(observations[1]?.payload.observation).toMatchObject({ timed_out: true, exit_code: -1 });
    expect(JSON.stringify(observations[1]?.payload.observation)).toMatch(/timed out after 1 seconds/);
    expect(observations[2]?.payload.observation).toMatchObject({ exit_code: 130 });
    const long = observations[3]!.payload.observation;
    const longText = textOfContent(long.content);
    expect(long.output_cut_bytes).toBeGreaterThan(60_000);
    expect(longText).toMatch(/output cut/);
    expect(longText).toMatch(/The whole output is in \/tmp\/tern-term\/out\//);
    expect(longText).toMatch(/END/);
    expect(longText.length).toBeLessThan(32_000);
    // The working directory carried over from the first command.
    expect(longText.startsWith("/tmp\n")).toBe(true);
  });

  it("file_editor: create, insert, view a range, undo_edit, and a path outside the workspace read", async () => {
    const { conversationId, sandboxRef } = await fx.newConversation({ message: "Edit files." });
    const path = `${workspaceDir}/src/list.txt`;
    fx.llm.push({
      toolCalls: [
        call("file_editor", { command: "create", path, file_text: "a\nb\nc" }),
        call("file_editor", { command: "insert", path, insert_line: 1, new_str: "inserted" }),
        call("file_editor", { command: "view", path, view_range: [2, 3] }),
        call("file_editor", { command: "undo_edit", path }),
        call("file_editor", { command: "view", path: "/etc/passwd" }),
        call("file_editor", { command: "create", path, file_text: "again" }),
      ],
    });
    fx.llm.push({ text: "done" });
    await fx.run(conversationId, "anthropic");
    const results = of(await fx.events(conversationId), "ObservationEvent").map(
      (e) => e.payload.observation as { content: { text: string }[]; is_error: boolean },
    );
    expect(results.map((r) => r.is_error)).toEqual([false, false, false, false, false, true]);
    expect(results[2]?.content[0]?.text).toMatch(/2\tinserted\n\s+3\tb/);
    // Any path in the sandbox, as OpenHands' file_editor allows.
    expect(results[4]?.content[0]?.text).toMatch(/root:x:0:0/);
    expect(results[5]?.content[0]?.text).toMatch(/already exists/);
    expect(await fx.exec(sandboxRef, `cat ${path}`)).toBe("a\nb\nc");
  });

  it("creates a file larger than a program travels inline (uploaded first, still run once)", async () => {
    const { conversationId, sandboxRef } = await fx.newConversation({ message: "Big file." });
    const big = `${"x".repeat(99)}\n`.repeat(1500); // 150 000 bytes
    fx.llm.push(
      { toolCalls: [call("file_editor", { command: "create", path: `${workspaceDir}/big.txt`, file_text: big })] },
      { text: "done" },
    );
    const { conversation } = await fx.run(conversationId, "openai");
    expect(conversation.executionStatus).toBe("finished");
    expect((await fx.exec(sandboxRef, `wc -c < ${workspaceDir}/big.txt`)).trim()).toBe("150000");
  });

  it("ends the run in error, not in retries, when the container is gone behind our back", async () => {
    const { conversationId, sandboxRef } = await fx.newConversation({ message: "Work." });
    await fx.sandboxes.destroy(sandboxRef);
    fx.llm.push({ toolCalls: [call("terminal", { command: "echo never" })] });
    // It ends (a job would complete), rather than throwing (a job would be retried).
    const { conversation, outcome } = await fx.run(conversationId, "openai");
    expect(outcome).toEqual({ outcome: "ended", status: "error" });
    expect(conversation.executionStatus).toBe("error");
    const events = await fx.events(conversationId);
    expect(String(of(events, "AgentErrorEvent")[0]?.payload.error)).toMatch(/sandbox is gone/);
    const run = await fx.database.db
      .selectFrom("agent_runs")
      .select("attempts")
      .where("conversation_id", "=", conversationId)
      .executeTakeFirstOrThrow();
    expect(run.attempts).toBe(1);
  });
});
