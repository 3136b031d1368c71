import { isToolCallError, type StoredEvent } from "@tern/core";
import { estimateTokens } from "./tokens.ts";

/** What asks for a condensation (OpenHands' Reason: EVENTS, TOKENS, REQUEST). */
export type CondensationReason = "events" | "tokens" | "context_error";

export interface CondenserLimits {
  /** Events in the view above which it is condensed (OpenHands' max_size); 0: never for this. */
  maxEvents: number;
  /** Tokens a request may take (the model's context less the answer's room); null: unknown. */
  maxTokens: number | null;
}

export interface CondensationPlan {
  reason: CondensationReason;
  /** View events to replace with a summary: the middle, previous summary included. */
  forgotten: StoredEvent[];
  /** Where the summary goes: after the head. */
  summaryOffset: number;
  /** The first event kept after the summary; every later event stays in the view. */
  keptFromSeq: number;
}

/** The head is never forgotten: up to the first user message, when it comes early (else the system prompt). */
const HEAD_REACH = 4;

const headLength = (view: StoredEvent[]): number => {
  const firstUser = view.findIndex((e) => e.kind === "MessageEvent" && e.source === "user");
  if (firstUser >= 0 && firstUser < HEAD_REACH) return firstUser + 1;
  const system = view.findIndex((e) => e.kind === "SystemPromptEvent");
  return system >= 0 && system < HEAD_REACH ? system + 1 : 0;
};

const responseOf = (e: StoredEvent): string | undefined =>
  e.kind === "ActionEvent" ? e.payload.llm_response_id : isToolCallError(e) ? e.payload.llm_response_id : undefined;

/**
 * The indices where the view may be cut (OpenHands' manipulation indices): never between a call
 * and its result, nor between two calls of one response, so every result the model sees has its
 * call and every call its result.
 */
const cutPoints = (view: StoredEvent[]): boolean[] => {
  const open = new Set<string>();
  const ok: boolean[] = [];
  for (let i = 0; i < view.length; i++) {
    const e = view[i] as StoredEvent;
    const response = responseOf(e);
    const sameResponse = response !== undefined && response === responseOf(view[i - 1] as StoredEvent);
    const result = e.kind === "ObservationEvent" || e.kind === "UserRejectObservation";
    ok.push(open.size === 0 && !result && !sameResponse);
    if (e.kind === "ActionEvent") open.add(e.payload.tool_call_id);
    if (result) open.delete(e.payload.tool_call_id);
  }
  ok.push(open.size === 0);
  return ok;
};

/** Tokens an event adds to a request, estimated (its payload holds the call twice: an over-estimate). */
const eventTokens = (e: StoredEvent): number => estimateTokens(e.payload);

/** Why the view must be condensed before the request of `requestTokens` is sent, if it must. */
export const condensationReason = (
  view: StoredEvent[],
  requestTokens: number,
  limits: CondenserLimits,
): CondensationReason | null => {
  if (limits.maxTokens !== null && requestTokens > limits.maxTokens) return "tokens";
  if (limits.maxEvents > 0 && view.length > limits.maxEvents) return "events";
  return null;
};

/**
 * What to forget, as OpenHands' LLMSummarizingCondenser chooses it: keep the head and a tail,
 * forget the middle (the previous summary with it: the new summary covers it). The tail is the
 * strictest of what the reason asks: half of `maxEvents` for events, half the token limit for
 * tokens, half the view after a context-length refusal. Null when nothing can be forgotten.
 */
export const planCondensation = (
  view: StoredEvent[],
  reason: CondensationReason,
  limits: CondenserLimits,
): CondensationPlan | null => {
  const head = headLength(view);
  let keep: number;
  if (reason === "events") {
    keep = Math.floor(limits.maxEvents / 2) - head - 1;
  } else if (reason === "tokens" && limits.maxTokens !== null) {
    const budget = Math.floor(limits.maxTokens / 2) - view.slice(0, head).reduce((n, e) => n + eventTokens(e), 0);
    keep = 0;
    for (let used = 0, i = view.length - 1; i >= head; i--) {
      used += eventTokens(view[i] as StoredEvent);
      if (used > budget) break;
      keep++;
    }
  } else {
    keep = Math.floor(view.length / 2) - head - 1;
  }
  // The last event always stays: it is what the model answers.
  keep = Math.max(1, keep);
  const ok = cutPoints(view);
  let end = view.length - keep;
  while (end < view.length && !ok[end]) end++;
  // No cut in the tail (one response's calls span it): cut before it instead.
  if (end >= view.length) {
    end = view.length - keep;
    while (end > head && !ok[end]) end--;
  }
  let start = head;
  while (start < end && !ok[start]) start++;
  if (end <= start || end >= view.length) return null;
  const forgotten = view.slice(start, end);
  // Forgetting only an earlier summary, to write it again, gains nothing.
  if (forgotten.every((e) => e.kind === "CondensationEvent")) return null;
  return { reason, forgotten, summaryOffset: start, keptFromSeq: (view[end] as StoredEvent).seq };
};
