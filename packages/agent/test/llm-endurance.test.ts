import { randomUUID } from "node:crypto";
import { type EventKind, type StoredEvent, type StoredEventOf, textOfContent } from "@tern/core";
import { fixtureWorkspaceDir as workspaceDir } from "@tern/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { LlmClientOptions, LlmSettings } from "../src/llm/select.ts";
import type { LlmProvider } from "../src/llm/types.ts";
import { runAgent } from "../src/loop.ts";
import { createRunFixture, type RunFixture } from "./run-fixture.ts";

/**
 * A real model's endurance, through the strict scripted servers and a real sandbox: each model
 * asked for its own maximum output, replies cut by length not run, rate limits and overloads
 * waited out and shown, reasoning kept across a tool turn, and tools for a model without native
 * calls.
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

/** One run of `model` on `provider`, with settings and client options over the fixture's. */
const runWith = async (
  conversationId: string,
  provider: LlmProvider,
  model: string,
  settings: Partial<LlmSettings> & { MAX_BUDGET_PER_TASK?: number } = {},
  llmOptions: LlmClientOptions = {},
) => {
  const deps = fx.depsFor(provider);
  const outcome = await runAgent(
    { ...deps, settings: { ...deps.settings, LLM_MODEL: model, ...settings }, llmOptions },
    conversationId,
    randomUUID(),
  );
  return { outcome, conversation: await fx.conversation(conversationId), events: await fx.events(conversationId) };
};

describe("output length", () => {
  it("asks a 64k-output model for its maximum, and a 40,000-token file write lands whole", async () => {
    const { conversationId, sandboxRef } = await fx.newConversation({ message: "Write the big file." });
    // 40,000 tokens at four characters a token, in lines a test can check.
    const line = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ-=+*/";
    const body = Array.from({ length: Math.ceil(160_000 / (line.length + 1)) }, (_, i) => `${i} ${line}`).join("\n");
    const before = fx.llm.requests.length;
    fx.llm.push(
      {
        toolCalls: [call("file_editor", { command: "create", path: `${workspaceDir}/big.txt`, file_text: body })],
        usage: { input: 100, output: 40_000 },
      },
      { toolCalls: [call("finish", { message: "Written." })] },
    );
    const { conversation } = await runWith(conversationId, "anthropic", "claude-sonnet-4-5");
    expect(conversation.executionStatus).toBe("finished");
    const asked = fx.llm.requests.slice(before).map((r) => [r.body.max_tokens, r.violation]);
    expect(asked).toEqual([
      [64_000, null],
      [64_000, null],
    ]);
    expect(body.length).toBeGreaterThanOrEqual(160_000);
    expect((await fx.exec(sandboxRef, `wc -c < ${workspaceDir}/big.txt`)).trim()).toBe(String(body.length));
    expect((await fx.exec(sandboxRef, `tail -n 1 ${workspaceDir}/big.txt`)).trim()).toBe(body.split("\n").at(-1));
  });

  for (const provider of ["anthropic", "openai"] as const) {
    it(`does not run a ${provider} reply cut by length: the model is told, and the run goes on`, async () => {
      const { conversationId, sandboxRef } = await fx.newConversation({ message: "Write the file." });
      const before = fx.llm.requests.length;
      fx.llm.push(
        {
          text: "Writing it in one go.",
          toolCalls: [
            call("file_editor", `{"command": "create", "path": "${workspaceDir}/cut.txt", "file_text": "aaaa`),
          ],
          truncated: true,
        },
        {
          toolCalls: [
            call("file_editor", { command: "create", path: `${workspaceDir}/cut.txt`, file_text: "part 1\n" }),
          ],
        },
        { toolCalls: [call("finish", { message: "Done in pieces." })] },
      );
      const { conversation, events } = await runWith(conversationId, provider, "m");
      expect(conversation.executionStatus).toBe("finished");
      // One file_editor call ran: the whole one.
      expect(of(events, "ActionEvent").map((a) => a.payload.tool_name)).toEqual(["file_editor", "finish"]);
      expect(await fx.exec(sandboxRef, `cat ${workspaceDir}/cut.txt`)).toBe("part 1\n");
      const told = of(events, "MessageEvent").filter((m) => m.source === "environment");
      expect(told).toHaveLength(1);
      expect(textOfContent(told[0]?.payload.llm_message.content ?? [])).toMatch(/cut off.*not run.*smaller pieces/s);
      // The model read that, right after its cut reply.
      expect(JSON.stringify(fx.llm.requests[before + 1]?.body)).toMatch(/cut off/);
      expect(conversation.metrics.llm_calls).toBe(3);
    });
  }
});

describe("retries", () => {
  it("waits out a storm of 429s with Retry-After, then 529s, shows each wait, and finishes", async () => {
    const { conversationId } = await fx.newConversation({ message: "Say hi." });
    const before = fx.llm.requests.length;
    fx.llm.push(
      { error: { status: 429, message: "rate limited", retryAfter: 1 } },
      { error: { status: 429, message: "rate limited", headers: { "retry-after-ms": "200" } } },
      { error: { status: 429, message: "rate limited", retryAfter: 1 } },
      { error: { status: 529, message: "Overloaded" } },
      { error: { status: 529, message: "Overloaded" } },
      { error: { status: 529, message: "Overloaded" } },
      { text: "hi" },
    );
    const { conversation, events } = await runWith(
      conversationId,
      "anthropic",
      "m",
      { LLM_RETRY_MAX_WAIT: 30 },
      { retry: { baseBackoffMs: 20 } },
    );
    expect(conversation.executionStatus).toBe("finished");
    expect(fx.llm.requests.length - before).toBe(7);
    const waits = events.filter((e) => e.kind === "ConversationStateUpdateEvent" && e.payload.key === "llm_retry");
    expect(
      waits.map((w) => {
        const v = (w as StoredEventOf<"ConversationStateUpdateEvent">).payload.value as Record<string, unknown>;
        return [v.reason, v.status, v.retry_after, v.wait_seconds];
      }),
    ).toEqual([
      ["rate_limited", 429, true, 1],
      ["rate_limited", 429, true, 0.2],
      ["rate_limited", 429, true, 1],
      ["overloaded", 529, false, expect.any(Number)],
      ["overloaded", 529, false, expect.any(Number)],
      ["overloaded", 529, false, expect.any(Number)],
    ]);
    const first = (waits[0] as StoredEventOf<"ConversationStateUpdateEvent">).payload.value as { message: string };
    expect(first.message).toBe("the model is rate-limited; retrying in 1 s");
    expect(textOfContent(of(events, "MessageEvent").at(-1)?.payload.llm_message.content ?? [])).toBe("hi");
  });

  it("ends the run in error once the waits would pass LLM_RETRY_MAX_WAIT", async () => {
    const { conversationId } = await fx.newConversation({ message: "Say hi." });
    fx.llm.push({ error: { status: 429, message: "rate limited", retryAfter: 120 } });
    const { conversation, events } = await runWith(conversationId, "openai", "m", { LLM_RETRY_MAX_WAIT: 5 });
    expect(conversation.executionStatus).toBe("error");
    expect(String(of(events, "AgentErrorEvent").at(-1)?.payload.error)).toMatch(
      /rate-limited: gave up after 0 s of retries; it asks to wait 120 s more, past LLM_RETRY_MAX_WAIT/,
    );
  });
});

describe("reasoning", () => {
  it("gives Anthropic's thinking blocks back unchanged across a three-call tool turn", async () => {
    const { conversationId } = await fx.newConversation({ message: "Look around, then say what you saw." });
    const before = fx.llm.requests.length;
    fx.llm.push(
      {
        thinking: [{ thinking: "First I list the files." }, { redacted: "EqQBCkgIARABGAIiQL7opaque" }],
        text: "Listing.",
        toolCalls: [call("terminal", { command: "ls /" })],
      },
      { thinking: [{ thinking: "Now the date." }], toolCalls: [call("terminal", { command: "date +%Y" })] },
      { thinking: [{ thinking: "I can answer." }], text: "I saw the root and the year." },
    );
    const { conversation, events } = await runWith(conversationId, "anthropic", "claude-sonnet-4-5", {
      LLM_THINKING_BUDGET: 4_096,
    });
    expect(conversation.executionStatus).toBe("finished");
    const requests = fx.llm.requests.slice(before);
    expect(requests.map((r) => r.violation)).toEqual([null, null, null]);
    expect(requests[0]?.body.thinking).toEqual({ type: "enabled", budget_tokens: 4_096 });
    // The third request holds both earlier replies' thinking, exactly as they were sent.
    const third = JSON.stringify(requests[2]?.body);
    expect(third).toContain("First I list the files.");
    expect(third).toContain("EqQBCkgIARABGAIiQL7opaque");
    expect(third).toContain("Now the date.");
    // The events carry them as OpenHands' do: on the first call of each response, and on the answer.
    const actions = of(events, "ActionEvent");
    expect(actions[0]?.payload.reasoning_content).toBe("First I list the files.");
    expect(actions[0]?.payload.thinking_blocks?.map((b) => b.type)).toEqual(["thinking", "redacted_thinking"]);
    const answer = of(events, "MessageEvent").at(-1);
    expect(answer?.payload.llm_message.reasoning_content).toBe("I can answer.");
  });

  it("asks OpenAI's reasoning model for its effort in a well-formed request", async () => {
    const { conversationId } = await fx.newConversation({ message: "Say hi." });
    fx.llm.push({ text: "hi", usage: { input: 10, output: 50, reasoning: 40 } });
    const { conversation } = await runWith(conversationId, "openai", "o4-mini", { LLM_REASONING_EFFORT: "high" });
    expect(conversation.executionStatus).toBe("finished");
    const request = fx.llm.requests.at(-1);
    expect(request?.violation).toBeNull();
    expect(request?.body).toMatchObject({ model: "o4-mini", reasoning_effort: "high", max_completion_tokens: 100_000 });
    expect(request?.body.temperature).toBeUndefined();
    expect(request?.body.max_tokens).toBeUndefined();
  });
});

describe("a model without native tool calls", () => {
  it("runs a three-step task with its tools in the prompt and its calls parsed from its replies", async () => {
    const { conversationId, sandboxRef } = await fx.newConversation({ message: "Make notes.txt and check it." });
    const before = fx.llm.requests.length;
    fx.llm.push(
      {
        text:
          `I will create the file.\n<function=file_editor>\n<parameter=command>create</parameter>\n` +
          `<parameter=path>${workspaceDir}/notes.txt</parameter>\n<parameter=file_text>\nfirst line\nsecond line\n</parameter>\n` +
          "<parameter=security_risk>LOW</parameter>\n</function>",
      },
      { text: `<function=terminal>\n<parameter=command>wc -l ${workspaceDir}/notes.txt</parameter>\n</function>` },
      { text: "<function=finish>\n<parameter=message>notes.txt has two lines.</parameter>\n</function>" },
    );
    const { conversation, events } = await runWith(conversationId, "openai", "m", { LLM_NATIVE_TOOL_CALLS: "off" });
    expect(conversation.executionStatus).toBe("finished");
    expect(of(events, "ActionEvent").map((a) => a.payload.tool_name)).toEqual(["file_editor", "terminal", "finish"]);
    expect(await fx.exec(sandboxRef, `cat ${workspaceDir}/notes.txt`)).toBe("first line\nsecond line");
    const requests = fx.llm.requests.slice(before);
    expect(requests.map((r) => [r.body.tools, r.violation])).toEqual([
      [undefined, null],
      [undefined, null],
      [undefined, null],
    ]);
    // The terminal's result came back as text the model reads (the file's last line has no newline).
    expect(JSON.stringify(requests[2]?.body)).toMatch(/EXECUTION RESULT of \[terminal\]:\\n1 \/\S*notes\.txt/);
  });
});

describe("model facts", () => {
  it("refuses to run a model without a price under a budget, rather than count it at $0", async () => {
    const { conversationId: budgeted } = await fx.newConversation({ message: "Say hi." });
    const before = fx.llm.requests.length;
    const capped = await runWith(budgeted, "openai", "mystery-model", { MAX_BUDGET_PER_TASK: 5 });
    expect(capped.conversation.executionStatus).toBe("error");
    expect(String(of(capped.events, "AgentErrorEvent").at(-1)?.payload.error)).toMatch(
      /no price for the model mystery-model.*budget.*LLM_PRICES/,
    );
    expect(fx.llm.requests.length).toBe(before);
  });
});
