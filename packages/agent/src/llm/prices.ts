import { lookUpModel } from "./model-tables.ts";
import type { LlmProvider, LlmUsage } from "./types.ts";

/** USD per million tokens. `cacheRead`/`cacheWrite` default to `input`. */
export interface ModelPrice {
  input: number;
  output: number;
  cacheRead?: number;
  cacheWrite?: number;
}

export type PriceTable = Readonly<Record<string, ModelPrice>>;

/**
 * List prices of the providers' public APIs (USD per 1M tokens, as published in 2025). A model is
 * found by its exact name, else by the longest entry its name starts with (dated snapshots such as
 * `claude-sonnet-4-5-20250929`). LLM_PRICES adds to or overrides it (a self-hosted model, a
 * negotiated price); a model in neither costs 0 and cannot hold a budget (the run says so once).
 */
export const defaultPrices: PriceTable = {
  "gpt-5": { input: 1.25, output: 10, cacheRead: 0.125 },
  "gpt-5-mini": { input: 0.25, output: 2, cacheRead: 0.025 },
  "gpt-5-nano": { input: 0.05, output: 0.4, cacheRead: 0.005 },
  "gpt-4.1": { input: 2, output: 8, cacheRead: 0.5 },
  "gpt-4.1-mini": { input: 0.4, output: 1.6, cacheRead: 0.1 },
  "gpt-4.1-nano": { input: 0.1, output: 0.4, cacheRead: 0.025 },
  "gpt-4o": { input: 2.5, output: 10, cacheRead: 1.25 },
  "gpt-4o-mini": { input: 0.15, output: 0.6, cacheRead: 0.075 },
  o3: { input: 2, output: 8, cacheRead: 0.5 },
  "o4-mini": { input: 1.1, output: 4.4, cacheRead: 0.275 },
  "claude-opus-4-1": { input: 15, output: 75, cacheRead: 1.5, cacheWrite: 18.75 },
  "claude-opus-4": { input: 15, output: 75, cacheRead: 1.5, cacheWrite: 18.75 },
  "claude-sonnet-4-5": { input: 3, output: 15, cacheRead: 0.3, cacheWrite: 3.75 },
  "claude-sonnet-4": { input: 3, output: 15, cacheRead: 0.3, cacheWrite: 3.75 },
  "claude-3-7-sonnet": { input: 3, output: 15, cacheRead: 0.3, cacheWrite: 3.75 },
  "claude-haiku-4-5": { input: 1, output: 5, cacheRead: 0.1, cacheWrite: 1.25 },
  "claude-3-5-haiku": { input: 0.8, output: 4, cacheRead: 0.08, cacheWrite: 1 },
};

/** The price of `model` (provider prefix ignored), or null when the tables do not know it. */
export const priceOf = (model: string, extra: PriceTable = {}): ModelPrice | null =>
  lookUpModel(model, [extra, defaultPrices]);

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
