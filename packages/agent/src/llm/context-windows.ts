import { lookUpModel } from "./model-tables.ts";
/** Model name → tokens of its context window (input and output together). */
export type ContextWindowTable = Readonly<Record<string, number>>;

/**
 * Context windows of the providers' public models, as published in 2025 (the long-context betas
 * left out: a model gets them only when asked). Found as prices are (prices.ts): the exact name,
 * else the longest entry the name starts with. LLM_CONTEXT_WINDOWS adds to or overrides it; a
 * model in neither has no token trigger, and relies on the provider's context-length error.
 */
export const defaultContextWindows: ContextWindowTable = {
  "gpt-5": 400_000,
  "gpt-5-mini": 400_000,
  "gpt-5-nano": 400_000,
  "gpt-4.1": 1_047_576,
  "gpt-4.1-mini": 1_047_576,
  "gpt-4.1-nano": 1_047_576,
  "gpt-4o": 128_000,
  "gpt-4o-mini": 128_000,
  o3: 200_000,
  "o4-mini": 200_000,
  "claude-opus-4-1": 200_000,
  "claude-opus-4": 200_000,
  "claude-sonnet-4-5": 200_000,
  "claude-sonnet-4": 200_000,
  "claude-3-7-sonnet": 200_000,
  "claude-haiku-4-5": 200_000,
  "claude-3-5-haiku": 200_000,
};

/** The context window of `model` (provider prefix ignored), or null when the tables do not know it. */
export const contextWindowOf = (model: string, extra: ContextWindowTable = {}): number | null =>
  lookUpModel(model, [extra, defaultContextWindows]);
