import { z } from "zod";
import type { ConversationMetrics } from "../domain.ts";

/** OpenHands' TokenUsage. */
const tokenUsageSchema = z
  .object({
    model: z.string(),
    prompt_tokens: z.number().int(),
    completion_tokens: z.number().int(),
    cache_read_tokens: z.number().int(),
    cache_write_tokens: z.number().int(),
    reasoning_tokens: z.number().int(),
    context_window: z.number().int(),
    per_turn_token: z.number().int(),
    response_id: z.string(),
  })
  .meta({ id: "TokenUsage" });

/**
 * OpenHands' MetricsSnapshot: what a conversation's LLM calls used and cost (USD, from the price
 * table in @tern/agent), and its budget. `llm_calls` is ours, beside it.
 */
export const metricsSnapshotSchema = z
  .object({
    model_name: z.string(),
    accumulated_cost: z.number(),
    max_budget_per_task: z.number().nullable(),
    accumulated_token_usage: tokenUsageSchema,
    llm_calls: z.number().int(),
  })
  .meta({ id: "MetricsSnapshot" });

export type MetricsSnapshot = z.infer<typeof metricsSnapshotSchema>;

const n = (v: number | undefined) => (typeof v === "number" && Number.isFinite(v) ? v : 0);

/** The snapshot of a conversation's stored counters (conversations.metrics, added to atomically). */
export const toMetricsSnapshot = (m: ConversationMetrics, model: string | null): MetricsSnapshot => ({
  model_name: model ?? "default",
  accumulated_cost: n(m.accumulated_cost),
  max_budget_per_task: typeof m.max_budget_per_task === "number" ? m.max_budget_per_task : null,
  accumulated_token_usage: {
    model: model ?? "default",
    prompt_tokens: n(m.prompt_tokens),
    completion_tokens: n(m.completion_tokens),
    cache_read_tokens: n(m.cache_read_tokens),
    cache_write_tokens: n(m.cache_write_tokens),
    reasoning_tokens: n(m.reasoning_tokens),
    context_window: 0,
    per_turn_token: n(m.per_turn_token),
    response_id: "",
  },
  llm_calls: n(m.llm_calls),
});
