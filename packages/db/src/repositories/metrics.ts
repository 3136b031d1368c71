import type { ConversationMetrics } from "@tern/core";
import { type RawBuilder, sql } from "kysely";

/** A conversation's metrics before any LLM call. */
export const emptyMetrics: ConversationMetrics = {
  prompt_tokens: 0,
  completion_tokens: 0,
  total_tokens: 0,
  llm_calls: 0,
};

/** What a step adds to the conversation's metrics (`add`, summed) and sets in them (`set`). */
export interface MetricsChange {
  add?: Partial<ConversationMetrics>;
  set?: Partial<ConversationMetrics>;
}

/**
 * The `metrics` column after a change, as an expression over its current value: concurrent
 * changes add up under the row lock their update takes, none is lost.
 */
export const metricsChange = ({ add = {}, set = {} }: MetricsChange): RawBuilder<string> => {
  let expr = sql<string>`metrics`;
  for (const [k, v] of Object.entries(add)) {
    if (typeof v === "number" && v !== 0) {
      expr = sql`jsonb_set(${expr}, ${`{${k}}`}::text[], to_jsonb(coalesce((metrics->>${k})::numeric, 0) + ${v}))`;
    }
  }
  for (const [k, v] of Object.entries(set)) {
    if (typeof v === "number" && Number.isFinite(v))
      expr = sql`jsonb_set(${expr}, ${`{${k}}`}::text[], to_jsonb(${v}::numeric))`;
  }
  return expr;
};
