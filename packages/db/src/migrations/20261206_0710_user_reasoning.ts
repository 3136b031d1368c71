import type { Kysely } from "kysely";

/**
 * A user's own reasoning settings (/api/v1/settings): Anthropic's extended-thinking budget and the
 * reasoning effort of the models that take one. Null: the operator's LLM_THINKING_BUDGET and
 * LLM_REASONING_EFFORT; a conversation's own (an agent-server client's LLM) goes over both.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .alterTable("user_settings")
    .addColumn("llm_extended_thinking_budget", "integer")
    .addColumn("llm_reasoning_effort", "text")
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .alterTable("user_settings")
    .dropColumn("llm_reasoning_effort")
    .dropColumn("llm_extended_thinking_budget")
    .execute();
}
