import { startLlmServer } from "@tern/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { thinkingConfig, thinkingFits, toWire } from "./anthropic.ts";
import { chooseLlm, type LlmSettings, unknownModelWarning } from "./select.ts";
import type { LlmMessage, ThinkingBlock } from "./types.ts";

let server: Awaited<ReturnType<typeof startLlmServer>>;
beforeAll(async () => {
  server = await startLlmServer();
});
afterAll(() => server.close());

/** The body the client sends for one call of `model` on `provider`, with `settings` over the server's. */
const bodyOf = async (provider: "openai" | "anthropic", model: string, settings: Partial<LlmSettings> = {}) => {
  server.clear();
  server.push({ text: "ok" });
  const env = server.workerEnv(provider);
  const choice = chooseLlm(
    { LLM_PROVIDER: provider, LLM_BASE_URL: env.LLM_BASE_URL, LLM_API_KEY: "k", LLM_MODELS: ["*"], ...settings },
    model,
  );
  if (!choice.ok) throw new Error(choice.reason);
  await choice.client.complete({ system: "s", messages: [{ role: "user", text: "q" }], tools: [] });
  return { body: server.requests.at(-1)?.body ?? {}, choice };
};

describe("output length", () => {
  it("asks Anthropic for the model's own maximum output, or for LLM_MAX_OUTPUT_TOKENS", async () => {
    expect((await bodyOf("anthropic", "claude-sonnet-4-5")).body.max_tokens).toBe(64_000);
    expect((await bodyOf("anthropic", "claude-opus-4-1-20250805")).body.max_tokens).toBe(32_000);
    expect((await bodyOf("anthropic", "claude-sonnet-4-5", { LLM_MAX_OUTPUT_TOKENS: 20_000 })).body.max_tokens).toBe(
      20_000,
    );
    // A model the table does not know: a conservative limit, and the run is warned.
    const unknown = await bodyOf("anthropic", "claude-next");
    expect(unknown.body.max_tokens).toBe(8_192);
    expect(unknown.choice.ok && unknown.choice.facts).toBeNull();
    expect(unknownModelWarning("claude-next", 8_192)).toMatch(/not in tern's model table.*output limit 8192/);
  });

  it("asks OpenAI's models with max_completion_tokens and others' with max_tokens", async () => {
    const gpt = (await bodyOf("openai", "gpt-4.1")).body;
    expect([gpt.max_completion_tokens, gpt.max_tokens]).toEqual([32_768, undefined]);
    const deepseek = (await bodyOf("openai", "deepseek-chat")).body;
    expect([deepseek.max_completion_tokens, deepseek.max_tokens]).toEqual([undefined, 8_192]);
    // An unknown model on someone's OpenAI-compatible server: its own default.
    const local = (await bodyOf("openai", "llama-local")).body;
    expect([local.max_completion_tokens, local.max_tokens]).toEqual([undefined, undefined]);
  });
});

describe("reasoning", () => {
  it("asks an OpenAI reasoning model for its effort, with max_completion_tokens and no temperature", async () => {
    const body = (await bodyOf("openai", "o4-mini", { LLM_REASONING_EFFORT: "high" })).body;
    expect(body.reasoning_effort).toBe("high");
    expect(body.max_completion_tokens).toBe(100_000);
    for (const param of ["temperature", "top_p", "max_tokens"]) expect(body[param]).toBeUndefined();
    // A model that does not reason is not asked to.
    expect((await bodyOf("openai", "gpt-4o", { LLM_REASONING_EFFORT: "high" })).body.reasoning_effort).toBeUndefined();
  });

  it("turns Anthropic's thinking on with a budget below max_tokens, per conversation over per user", async () => {
    const body = (await bodyOf("anthropic", "claude-sonnet-4-5", { LLM_THINKING_BUDGET: 16_000 })).body;
    expect(body.thinking).toEqual({ type: "enabled", budget_tokens: 16_000 });
    expect(body.temperature).toBeUndefined();
    expect((await bodyOf("anthropic", "claude-sonnet-4-5")).body.thinking).toBeUndefined();
    expect(
      (await bodyOf("anthropic", "claude-3-5-haiku", { LLM_THINKING_BUDGET: 16_000 })).body.thinking,
    ).toBeUndefined();
    expect(thinkingConfig(200_000, 64_000)).toEqual({ type: "enabled", budget_tokens: 48_000 });
    expect(thinkingConfig(100, 64_000)).toEqual({ type: "enabled", budget_tokens: 1024 });
    expect(thinkingConfig(4_000, 1_024)).toBeNull();
    const env = server.workerEnv("anthropic");
    const settings = {
      LLM_PROVIDER: "anthropic" as const,
      LLM_BASE_URL: env.LLM_BASE_URL,
      LLM_API_KEY: "k",
      LLM_MODELS: ["*"],
      LLM_THINKING_BUDGET: 2_000,
    };
    const user = { model: null, baseUrl: null, apiKey: null, thinkingBudget: 4_000 };
    server.clear();
    server.push({ text: "ok" }, { text: "ok" });
    for (const conversation of [null, { thinkingBudget: 8_000 }]) {
      const choice = chooseLlm(settings, "claude-haiku-4-5", {}, user, conversation);
      if (!choice.ok) throw new Error(choice.reason);
      await choice.client.complete({ system: "s", messages: [{ role: "user", text: "q" }], tools: [] });
    }
    expect(server.requests.slice(-2).map((r) => (r.body.thinking as { budget_tokens: number }).budget_tokens)).toEqual([
      4_000, 8_000,
    ]);
  });

  it("sends thinking blocks back first and unchanged, and only while thinking is on", () => {
    const blocks: ThinkingBlock[] = [
      { type: "thinking", thinking: "Let me look.", signature: "sig-1" },
      { type: "redacted_thinking", data: "opaque" },
    ];
    const call = { id: "t1", name: "terminal", arguments: '{"command":"ls"}' };
    const messages: LlmMessage[] = [
      { role: "user", text: "go" },
      { role: "assistant", text: "Listing.", toolCalls: [call], thinkingBlocks: blocks },
      { role: "tool", toolCallId: "t1", toolName: "terminal", text: "a", isError: false },
    ];
    const wire = toWire(messages, true);
    expect(wire[1]?.content).toEqual([
      { type: "thinking", thinking: "Let me look.", signature: "sig-1" },
      { type: "redacted_thinking", data: "opaque" },
      { type: "text", text: "Listing." },
      { type: "tool_use", id: "t1", name: "terminal", input: { command: "ls" } },
    ]);
    expect(((toWire(messages, false)[1]?.content ?? []) as { type: string }[]).map((b) => b.type)).toEqual([
      "text",
      "tool_use",
    ]);
    // A tool turn written before thinking was on cannot be continued with it.
    expect(thinkingFits(messages)).toBe(true);
    const without = messages.map((m) => (m.role === "assistant" ? { ...m, thinkingBlocks: [] } : m));
    expect(thinkingFits(without)).toBe(false);
    expect(
      thinkingFits([...without, { role: "assistant", text: "done", toolCalls: [] }, { role: "user", text: "more" }]),
    ).toBe(true);
  });
});
