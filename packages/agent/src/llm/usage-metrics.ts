import { costOf, type ModelPrice } from "./models.ts";
import type { LlmClient, LlmUsage } from "./types.ts";

/** What one LLM call adds to the conversation's MetricsSnapshot (OpenHands' field names). */
export const usageMetrics = (llm: Pick<LlmClient, "provider">, price: ModelPrice | null, usage: LlmUsage) => ({
  add: {
    llm_calls: 1,
    prompt_tokens: usage.promptTokens,
    completion_tokens: usage.completionTokens,
    total_tokens: usage.promptTokens + usage.completionTokens,
    cache_read_tokens: usage.cacheReadTokens,
    cache_write_tokens: usage.cacheWriteTokens,
    accumulated_cost: price ? costOf(llm.provider, usage, price) : 0,
  },
  set: { per_turn_token: usage.promptTokens + usage.completionTokens },
});
