import { type AgentReasoning, type EventDraft, newEvent } from "@tern/core";
import { retryWaitText } from "./retry.ts";
import type { LlmResponse, LlmRetryWait } from "./types.ts";

/**
 * What the run stores of its LLM beside the model's own words. OpenHands has no event for an LLM
 * retry (its retry_listener only logs), so a wait is a ConversationStateUpdateEvent, the kind its
 * clients already parse: RemoteState keeps any key it is sent (`llm_retry` here) and changes
 * nothing else, and the V1 clients ignore keys they do not know.
 */

/** One wait before a retry: `llm_retry`, with the page's words and when it ends. */
export const retryWaitEvent = (wait: LlmRetryWait, now = Date.now()): EventDraft =>
  newEvent.stateUpdate("llm_retry", {
    reason: wait.reason,
    status: wait.status,
    attempt: wait.attempt,
    wait_seconds: Math.round(wait.waitMs) / 1000,
    retry_after: wait.retryAfter,
    retry_at: new Date(now + wait.waitMs).toISOString(),
    message: retryWaitText(wait),
  });

/** A budget that cannot be held: the model has no price, so the run is refused rather than counted at 0. */
export const unpricedBudgetError = (model: string, budget: number): string =>
  `There is no price for the model ${model} (it is not in tern's model table nor in LLM_PRICES), so the ` +
  `conversation's budget (max_budget_per_task $${budget}) cannot be held and the run is refused rather than ` +
  "counted at $0. Set its price in LLM_PRICES, choose a model the table knows, or lift the budget.";

/** Replies cut by length in a row past which the run ends: the model is not making its pieces smaller. */
export const MAX_TRUNCATED_IN_A_ROW = 3;

/** What the model reads after a reply cut by length (a user-role message from the environment). */
export const truncatedText = (response: LlmResponse, maxOutputTokens: number | null): string => {
  const limit = maxOutputTokens ? `the output limit of ${maxOutputTokens} tokens` : "the output limit";
  const what = response.toolCalls.length
    ? `its tool call${response.toolCalls.length > 1 ? "s" : ""} (${[...new Set(response.toolCalls.map((c) => c.name))].join(", ")}) may be incomplete`
    : "its text was incomplete";
  return (
    `Your last reply was cut off at ${limit} (stop reason: ${response.stopReason ?? "length"}), so it was not run: ${what}. ` +
    "Continue in smaller pieces: write a large file in parts (create it with the first part, then add the rest " +
    "with further edits), and keep each reply well under the limit."
  );
};

/** The reasoning of a response, as the agent's events carry it (OpenHands' fields). */
export const reasoningOf = (response: LlmResponse): AgentReasoning => ({
  ...(response.reasoningContent ? { reasoning_content: response.reasoningContent } : {}),
  ...(response.thinkingBlocks?.length ? { thinking_blocks: response.thinkingBlocks } : {}),
});
