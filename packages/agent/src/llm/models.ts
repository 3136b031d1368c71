import type { LlmProvider, LlmUsage } from "./types.ts";

/** USD per million tokens. `cacheRead`/`cacheWrite` default to `input`. */
export interface ModelPrice {
  input: number;
  output: number;
  cacheRead?: number;
  cacheWrite?: number;
}

/**
 * How a model reasons, and so what its request asks for:
 * - `thinking`: Anthropic's extended thinking (`thinking: {type: "enabled", budget_tokens}`);
 * - `effort`: OpenAI's `reasoning_effort` (OpenAI's reasoning models, Gemini through its OpenAI endpoint);
 * - `builtin`: the model always reasons and takes no parameter for it (DeepSeek's reasoner);
 * - `none`: no reasoning to ask for.
 */
type ReasoningKind = "thinking" | "effort" | "builtin" | "none";

/** Whose model it is: Gemini and DeepSeek are reached through their OpenAI-compatible endpoints. */
export type ModelVendor = "anthropic" | "openai" | "gemini" | "deepseek";

export interface ModelFacts {
  vendor: ModelVendor;
  /** Tokens of input and output together. */
  contextWindow: number;
  /** The most output tokens one reply may have. */
  maxOutput: number;
  price: ModelPrice;
  /** Accepts images in its input. */
  images: boolean;
  reasoning: ReasoningKind;
  /** Native tool calls; false: tools are described in the prompt and calls parsed from the reply. */
  tools: boolean;
}

/** The OpenAI-compatible endpoint of a vendor reached that way: where a user's own key for its models goes. */
export const vendorBaseUrls: Partial<Record<ModelVendor, string>> = {
  gemini: "https://generativelanguage.googleapis.com/v1beta/openai",
  deepseek: "https://api.deepseek.com/v1",
};

const anthropic = (
  contextWindow: number,
  maxOutput: number,
  price: ModelPrice,
  reasoning: ReasoningKind = "thinking",
): ModelFacts => ({ vendor: "anthropic", contextWindow, maxOutput, price, images: true, reasoning, tools: true });

const openai = (
  contextWindow: number,
  maxOutput: number,
  price: ModelPrice,
  reasoning: ReasoningKind,
  images = true,
): ModelFacts => ({ vendor: "openai", contextWindow, maxOutput, price, images, reasoning, tools: true });

const gemini = (maxOutput: number, price: ModelPrice, reasoning: ReasoningKind = "effort"): ModelFacts => ({
  vendor: "gemini",
  contextWindow: 1_048_576,
  maxOutput,
  price,
  images: true,
  reasoning,
  tools: true,
});

const claudeSonnet = { input: 3, output: 15, cacheRead: 0.3, cacheWrite: 3.75 };
const claudeOpus4 = { input: 15, output: 75, cacheRead: 1.5, cacheWrite: 18.75 };
const gpt5 = { input: 1.25, output: 10, cacheRead: 0.125 };
const deepseekV32 = { input: 0.28, output: 0.42, cacheRead: 0.028 };

/**
 * The providers' current public models, as their model pages and price lists publish them (late
 * 2025): context window, maximum output, list price (USD per 1M tokens; Gemini's at prompts up to
 * 200k tokens) and what each accepts. Long-context betas are left out (a model gets them only
 * when asked). A model is found by its exact name, or as a dated or tagged snapshot of one
 * (`claude-sonnet-4-5-20250929`, `gpt-4o-2024-08-06`, `gemini-2.5-pro-preview-06-05`), a provider
 * prefix ignored; LLM_PRICES and LLM_CONTEXT_WINDOWS override a model's price and window.
 */
export const modelTable: Readonly<Record<string, ModelFacts>> = {
  // Anthropic: https://docs.claude.com/en/docs/about-claude/models/overview and /pricing
  "claude-opus-4-5": anthropic(200_000, 64_000, { input: 5, output: 25, cacheRead: 0.5, cacheWrite: 6.25 }),
  "claude-opus-4-1": anthropic(200_000, 32_000, claudeOpus4),
  "claude-opus-4": anthropic(200_000, 32_000, claudeOpus4),
  "claude-sonnet-4-5": anthropic(200_000, 64_000, claudeSonnet),
  "claude-sonnet-4": anthropic(200_000, 64_000, claudeSonnet),
  "claude-3-7-sonnet": anthropic(200_000, 64_000, claudeSonnet),
  "claude-haiku-4-5": anthropic(200_000, 64_000, { input: 1, output: 5, cacheRead: 0.1, cacheWrite: 1.25 }),
  "claude-3-5-haiku": anthropic(200_000, 8_192, { input: 0.8, output: 4, cacheRead: 0.08, cacheWrite: 1 }, "none"),
  // OpenAI: https://platform.openai.com/docs/models and /docs/pricing
  "gpt-5.1": openai(400_000, 128_000, gpt5, "effort"),
  "gpt-5.1-codex": openai(400_000, 128_000, gpt5, "effort"),
  "gpt-5": openai(400_000, 128_000, gpt5, "effort"),
  "gpt-5-codex": openai(400_000, 128_000, gpt5, "effort"),
  "gpt-5-mini": openai(400_000, 128_000, { input: 0.25, output: 2, cacheRead: 0.025 }, "effort"),
  "gpt-5-nano": openai(400_000, 128_000, { input: 0.05, output: 0.4, cacheRead: 0.005 }, "effort"),
  "gpt-4.1": openai(1_047_576, 32_768, { input: 2, output: 8, cacheRead: 0.5 }, "none"),
  "gpt-4.1-mini": openai(1_047_576, 32_768, { input: 0.4, output: 1.6, cacheRead: 0.1 }, "none"),
  "gpt-4.1-nano": openai(1_047_576, 32_768, { input: 0.1, output: 0.4, cacheRead: 0.025 }, "none"),
  "gpt-4o": openai(128_000, 16_384, { input: 2.5, output: 10, cacheRead: 1.25 }, "none"),
  "gpt-4o-mini": openai(128_000, 16_384, { input: 0.15, output: 0.6, cacheRead: 0.075 }, "none"),
  o3: openai(200_000, 100_000, { input: 2, output: 8, cacheRead: 0.5 }, "effort"),
  "o3-mini": openai(200_000, 100_000, { input: 1.1, output: 4.4, cacheRead: 0.55 }, "effort", false),
  "o4-mini": openai(200_000, 100_000, { input: 1.1, output: 4.4, cacheRead: 0.275 }, "effort"),
  o1: openai(200_000, 100_000, { input: 15, output: 60, cacheRead: 7.5 }, "effort"),
  // Gemini: https://ai.google.dev/gemini-api/docs/models and /pricing, through its OpenAI endpoint
  "gemini-3-pro-preview": gemini(65_536, { input: 2, output: 12, cacheRead: 0.2 }),
  "gemini-2.5-pro": gemini(65_536, { input: 1.25, output: 10, cacheRead: 0.125 }),
  "gemini-2.5-flash": gemini(65_536, { input: 0.3, output: 2.5, cacheRead: 0.03 }),
  "gemini-2.5-flash-lite": gemini(65_536, { input: 0.1, output: 0.4, cacheRead: 0.01 }),
  "gemini-2.0-flash": gemini(8_192, { input: 0.1, output: 0.4, cacheRead: 0.025 }, "none"),
  // DeepSeek V3.2: https://api-docs.deepseek.com/quick_start/pricing, through its OpenAI endpoint. The
  // reasoner always thinks, and its tool calls need its reasoning sent back on each call of a turn:
  // it is given tools in its prompt instead.
  "deepseek-chat": {
    vendor: "deepseek",
    contextWindow: 128_000,
    maxOutput: 8_192,
    price: deepseekV32,
    images: false,
    reasoning: "none",
    tools: true,
  },
  "deepseek-reasoner": {
    vendor: "deepseek",
    contextWindow: 128_000,
    maxOutput: 65_536,
    price: deepseekV32,
    images: false,
    reasoning: "builtin",
    tools: false,
  },
};

/**
 * What a model the table does not know is taken to be: output short enough for any current model
 * (Anthropic's API needs a number; an OpenAI-compatible server is left to its own), no price, no
 * images, no reasoning, native tools. Its context window stays unknown: the provider's own
 * context-length error is what condenses its history.
 */
export const unknownModelFacts: Omit<ModelFacts, "vendor" | "contextWindow"> = {
  maxOutput: 8_192,
  price: { input: 0, output: 0 },
  images: false,
  reasoning: "none",
  tools: true,
};

/** What may follow a table name in a snapshot's name: a date, a version tag, `latest`, a preview or experiment tag. */
const SNAPSHOT_SUFFIX = /^(\d{4}-?\d{2}-?\d{2}|\d{4}|v\d[\w.-]*|latest|preview[\w.-]*|exp[\w.-]*)$/i;

/** A model name without its provider prefix (`openai/`, `anthropic/`, `gemini/`, `deepseek/`, `models/`). */
const bareModelName = (model: string): string =>
  model.trim().replace(/^(openai|anthropic|gemini|google|deepseek|models)\//i, "");

/**
 * A model's entry in tables keyed by model name, the first table first: its exact name, else the
 * longest key it is a snapshot of (`gpt-4o-2024-08-06` takes `gpt-4o`; `claude-opus-4-8` is not
 * `claude-opus-4`). A provider prefix is ignored. Null when no table knows the model.
 */
export const lookUpModel = <T>(model: string, tables: readonly Readonly<Record<string, T>>[]): T | null => {
  const name = bareModelName(model);
  for (const table of tables) {
    const exact = table[name];
    if (exact !== undefined) return exact;
    const key = Object.keys(table)
      .filter((k) => name.startsWith(`${k}-`) && SNAPSHOT_SUFFIX.test(name.slice(k.length + 1)))
      .sort((a, b) => b.length - a.length)[0];
    if (key !== undefined) return table[key] ?? null;
  }
  return null;
};

export type PriceTable = Readonly<Record<string, ModelPrice>>;
/** Model name → tokens of its context window (input and output together). */
export type ContextWindowTable = Readonly<Record<string, number>>;

/** The table's facts of `model`, or null when it does not know it. */
export const knownModelFacts = (model: string): ModelFacts | null => lookUpModel(model, [modelTable]);

/** The price of `model`: the operator's (LLM_PRICES) first, else the table's; null when neither knows it. */
export const priceOf = (model: string, extra: PriceTable = {}): ModelPrice | null =>
  lookUpModel(model, [extra]) ?? knownModelFacts(model)?.price ?? null;

/** The context window of `model`: the operator's (LLM_CONTEXT_WINDOWS) first, else the table's; null when unknown. */
export const contextWindowOf = (model: string, extra: ContextWindowTable = {}): number | null =>
  lookUpModel(model, [extra]) ?? knownModelFacts(model)?.contextWindow ?? null;

/**
 * The USD cost of one call. OpenAI counts cached tokens inside `prompt_tokens`; Anthropic counts
 * cache reads and writes apart from `input_tokens` (as our LlmUsage carries them).
 */
export const costOf = (provider: LlmProvider, usage: LlmUsage, price: ModelPrice): number => {
  const read = price.cacheRead ?? price.input;
  const write = price.cacheWrite ?? price.input;
  const uncached = provider === "openai" ? Math.max(0, usage.promptTokens - usage.cacheReadTokens) : usage.promptTokens;
  const micro =
    uncached * price.input +
    usage.cacheReadTokens * read +
    usage.cacheWriteTokens * write +
    usage.completionTokens * price.output;
  return micro / 1_000_000;
};
