import { startLlmServer } from "@tern/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { callText, parseCalls, withoutNativeCalls } from "./prompt-tools.ts";
import { chooseLlm } from "./select.ts";
import type { ToolDefinition } from "./types.ts";

const tools: ToolDefinition[] = [
  {
    name: "terminal",
    description: "Runs a command.",
    parameters: {
      type: "object",
      properties: {
        command: { type: "string", description: "The command." },
        timeout: { type: "integer" },
        is_input: { type: "boolean" },
        view_range: { type: "array", items: { type: "integer" } },
      },
      required: ["command"],
    },
  },
];

let n = 0;
const ids = () => `call_${++n}`;

describe("prompt tool calls", () => {
  it("parses calls from a reply, each parameter as its schema's type, the text before them kept", () => {
    const reply =
      "I will list the files.\n\n<function=terminal>\n<parameter=command>ls -la\necho done</parameter>\n" +
      "<parameter=timeout>30</parameter>\n<parameter=is_input>false</parameter>\n" +
      "<parameter=view_range>[1, 5]</parameter>\n</function>";
    const parsed = parseCalls(reply, tools, ids);
    expect(parsed.text).toBe("I will list the files.");
    expect(parsed.toolCalls).toHaveLength(1);
    expect(JSON.parse(parsed.toolCalls[0]?.arguments ?? "")).toEqual({
      command: "ls -la\necho done",
      timeout: 30,
      is_input: false,
      view_range: [1, 5],
    });
  });

  it("closes a last call whose </function> the model left out, and reads a reply with none as text", () => {
    const open = parseCalls("<function=terminal>\n<parameter=command>pwd</parameter>\n", tools, ids);
    expect(open.toolCalls.map((c) => [c.name, JSON.parse(c.arguments)])).toEqual([["terminal", { command: "pwd" }]]);
    expect(parseCalls("All done.", tools, ids)).toEqual({ text: "All done.", toolCalls: [] });
  });

  it("writes past calls back in the reply's form, and results as user messages", () => {
    const call = { id: "c1", name: "terminal", arguments: JSON.stringify({ command: "cat a\nb", timeout: 5 }) };
    expect(callText(call)).toBe(
      "<function=terminal>\n<parameter=command>\ncat a\nb\n</parameter>\n<parameter=timeout>5</parameter>\n</function>",
    );
    // Round trip: what it writes, it reads back as the same arguments.
    expect(JSON.parse(parseCalls(callText(call), tools, ids).toolCalls[0]?.arguments ?? "")).toEqual({
      command: "cat a\nb",
      timeout: 5,
    });
    expect(
      withoutNativeCalls([
        { role: "assistant", text: "Looking.", toolCalls: [call] },
        { role: "tool", toolCallId: "c1", toolName: "terminal", text: "a", isError: false },
      ]),
    ).toEqual([
      { role: "assistant", text: `Looking.\n\n${callText(call)}`, toolCalls: [] },
      { role: "user", text: "EXECUTION RESULT of [terminal]:\na" },
    ]);
  });
});

describe("a model without native tool calls", () => {
  let server: Awaited<ReturnType<typeof startLlmServer>>;
  beforeAll(async () => {
    server = await startLlmServer();
  });
  afterAll(() => server.close());

  for (const provider of ["openai", "anthropic"] as const) {
    it(`gets its tools in the prompt on ${provider}, none native, and its calls come back as native ones`, async () => {
      server.clear();
      server.push({ text: "Listing.\n<function=terminal>\n<parameter=command>ls</parameter>\n</function>" });
      const env = server.workerEnv(provider);
      const settings = { LLM_PROVIDER: provider, LLM_BASE_URL: env.LLM_BASE_URL, LLM_API_KEY: "k", LLM_MODEL: "m" };
      const choice = chooseLlm({ ...settings, LLM_NATIVE_TOOL_CALLS: "off" }, null);
      if (!choice.ok) throw new Error(choice.reason);
      expect(choice.promptToolCalls).toBe(true);
      const answer = await choice.client.complete({
        system: "You are an agent.",
        messages: [
          { role: "user", text: "list" },
          { role: "assistant", text: "", toolCalls: [{ id: "c0", name: "terminal", arguments: '{"command":"pwd"}' }] },
          { role: "tool", toolCallId: "c0", toolName: "terminal", text: "/work", isError: false },
        ],
        tools,
      });
      expect(answer.text).toBe("Listing.");
      expect(answer.toolCalls.map((c) => [c.name, c.arguments])).toEqual([["terminal", '{"command":"ls"}']]);
      const body = server.requests.at(-1)?.body ?? {};
      expect(body.tools).toBeUndefined();
      expect(JSON.stringify(body)).toContain("---- BEGIN FUNCTION #1: terminal ----");
      expect(JSON.stringify(body)).toContain("EXECUTION RESULT of [terminal]:\\n/work");
      expect(JSON.stringify(body)).not.toContain("tool_use");
    });
  }

  it("is chosen by the model table for a model it marks so, and by the setting over it", () => {
    const base = { LLM_PROVIDER: "openai" as const, LLM_API_KEY: "k", LLM_MODELS: ["*"] };
    const reasoner = chooseLlm({ ...base, LLM_MODEL: "deepseek-reasoner" }, null);
    expect(reasoner.ok && reasoner.promptToolCalls).toBe(true);
    const forced = chooseLlm({ ...base, LLM_MODEL: "deepseek-reasoner", LLM_NATIVE_TOOL_CALLS: "on" }, null);
    expect(forced.ok && forced.promptToolCalls).toBe(false);
    const chat = chooseLlm({ ...base, LLM_MODEL: "deepseek-chat" }, null);
    expect(chat.ok && chat.promptToolCalls).toBe(false);
  });
});
