import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { LlmProvider } from "../src/llm/types.ts";
import { runAgent } from "../src/loop.ts";
import { createRunFixture, type RunFixture } from "./run-fixture.ts";

/**
 * Prompt caching: Anthropic gets cache_control breakpoints on the system prompt and the
 * last two user turns; OpenAI-compatible servers a prompt_cache_key; the cached tokens either
 * reports land in the conversation's metrics and are priced as cached.
 */
let fx: RunFixture;

beforeAll(async () => {
  fx = await createRunFixture();
});

afterAll(async () => {
  await fx?.close();
});

// USD per million tokens, as Anthropic prices Sonnet: reads a tenth of input, writes 1.25 times.
const price = { input: 3, output: 15, cacheRead: 0.3, cacheWrite: 3.75 };

const runWithPrices = async (conversationId: string, provider: LlmProvider) => {
  const deps = fx.depsFor(provider);
  const model = provider === "openai" ? "gpt-test" : "claude-test";
  const settings = { ...deps.settings, LLM_PRICES: { [model]: price } };
  await runAgent({ ...deps, settings }, conversationId, randomUUID());
  return fx.conversation(conversationId);
};

type Block = { type: string; cache_control?: { type: string } };
type WireMessage = { role: string; content: string | Block[] };

/** Where a request carries cache_control: "system", or "<message index>:<block index>". */
const breakpoints = (body: Record<string, unknown>): string[] => {
  const found: string[] = [];
  for (const b of body.system as Block[]) if (b.cache_control) found.push("system");
  (body.messages as WireMessage[]).forEach((m, i) => {
    if (typeof m.content === "string") return;
    m.content.forEach((b, j) => {
      if (b.cache_control) found.push(`${i}:${j}`);
    });
  });
  return found;
};

describe("prompt caching", () => {
  it("Anthropic: breakpoints on the system prompt and the last two user turns; cached tokens in the metrics", async () => {
    const { conversationId } = await fx.newConversation({ message: "Think twice, then answer." });
    const before = fx.llm.requests.length;
    fx.llm.push(
      {
        toolCalls: [{ name: "think", arguments: { thought: "one" } }],
        usage: { input: 100, output: 10, cacheRead: 0, cacheWrite: 2000 },
      },
      {
        toolCalls: [{ name: "think", arguments: { thought: "two" } }],
        usage: { input: 50, output: 10, cacheRead: 2000, cacheWrite: 150 },
      },
      { text: "Answered.", usage: { input: 40, output: 10, cacheRead: 2150, cacheWrite: 60 } },
    );
    const conversation = await runWithPrices(conversationId, "anthropic");
    expect(conversation.executionStatus).toBe("finished");
    const sent = fx.llm.requests.slice(before).map((r) => r.body);
    expect(sent).toHaveLength(3);
    // The system prompt is one cached block.
    expect(sent[0]?.system).toEqual([expect.objectContaining({ type: "text", cache_control: { type: "ephemeral" } })]);
    // First request: [user]. Second: [user, assistant(think), user(result)]. Third: … and its result.
    expect(breakpoints(sent[0] as Record<string, unknown>)).toEqual(["system", "0:0"]);
    expect(breakpoints(sent[1] as Record<string, unknown>)).toEqual(["system", "0:0", "2:0"]);
    expect(breakpoints(sent[2] as Record<string, unknown>)).toEqual(["system", "2:0", "4:0"]);
    // The breakpoint is on the last block of the turn: the tool result.
    const third = ((sent[2]?.messages ?? []) as WireMessage[])[4]?.content;
    expect(Array.isArray(third) && third.at(-1)?.type).toBe("tool_result");

    expect(conversation.metrics).toMatchObject({
      cache_read_tokens: 4150,
      cache_write_tokens: 2210,
      prompt_tokens: 190,
      completion_tokens: 30,
    });
    // Priced as cached: uncached input, reads, writes and output each at their own price.
    const cost = (190 * 3 + 4150 * 0.3 + 2210 * 3.75 + 30 * 15) / 1_000_000;
    expect(conversation.metrics.accumulated_cost).toBeCloseTo(cost, 10);
  });

  it("OpenAI: a prompt_cache_key per conversation; cached tokens counted within the prompt's", async () => {
    const { conversationId } = await fx.newConversation({ message: "Think, then answer." });
    const before = fx.llm.requests.length;
    fx.llm.push(
      { toolCalls: [{ name: "think", arguments: { thought: "one" } }], usage: { input: 3000, output: 10 } },
      { text: "Answered.", usage: { input: 3100, output: 10, cacheRead: 2944 } },
    );
    const conversation = await runWithPrices(conversationId, "openai");
    expect(conversation.executionStatus).toBe("finished");
    const sent = fx.llm.requests.slice(before).map((r) => r.body);
    expect(sent.map((b) => b.prompt_cache_key)).toEqual([conversationId, conversationId]);
    // A stable prefix: the second request starts with the first one's messages, unchanged.
    const [first, second] = sent.map((b) => b.messages as unknown[]);
    expect(second?.slice(0, first?.length)).toEqual(first);
    expect(conversation.metrics).toMatchObject({ cache_read_tokens: 2944, prompt_tokens: 6100 });
    const cost = ((6100 - 2944) * 3 + 2944 * 0.3 + 20 * 15) / 1_000_000;
    expect(conversation.metrics.accumulated_cost).toBeCloseTo(cost, 10);
  });
});
