import { randomUUID } from "node:crypto";
import { type EventDraftOf, newEvent, type StoredEvent } from "@tern/core";
import { type ContextWindowTable, contextWindowOf } from "../llm/models.ts";
import type { LlmClient, LlmResponse } from "../llm/types.ts";
import { type CondensationReason, type CondenserLimits, planCondensation } from "./plan.ts";
import { summarize } from "./summarize.ts";

/** Events in the view above which it is condensed: OpenHands' default agent condenser (max_size 80). */
const DEFAULT_CONDENSER_MAX_EVENTS = 80;

export interface CondenserSettings {
  /** AGENT_CONDENSER_MAX_EVENTS (default 80); 0: no condensation at all. */
  AGENT_CONDENSER_MAX_EVENTS?: number;
  /** LLM_CONTEXT_WINDOWS: context windows added to the built-in table. */
  LLM_CONTEXT_WINDOWS?: ContextWindowTable;
}

/**
 * The condenser's limits for a model, or null when condensation is off. A request may take the
 * model's context less the room of its answer (the answer's max tokens, at most a quarter of the
 * context).
 */
export const condenserLimits = (
  model: string,
  settings: CondenserSettings,
  answerTokens = 4096,
): CondenserLimits | null => {
  const maxEvents = settings.AGENT_CONDENSER_MAX_EVENTS ?? DEFAULT_CONDENSER_MAX_EVENTS;
  if (maxEvents === 0) return null;
  const window = contextWindowOf(model, settings.LLM_CONTEXT_WINDOWS);
  return {
    maxEvents,
    maxTokens: window === null ? null : window - Math.min(answerTokens, Math.floor(window / 4)),
  };
};

export interface Condensation {
  draft: EventDraftOf<"CondensationEvent">;
  /** The summary call: its usage counts in the conversation's metrics and budget. */
  response: LlmResponse;
}

/**
 * A CondensationEvent for `view`: the middle forgotten, summarized by the LLM. Null when nothing
 * can be forgotten (the view is its head and one response already).
 */
export const condense = async (
  llm: LlmClient,
  view: StoredEvent[],
  reason: CondensationReason,
  limits: CondenserLimits,
  signal?: AbortSignal,
): Promise<Condensation | null> => {
  const plan = planCondensation(view, reason, limits);
  if (!plan) return null;
  const summary = await summarize(llm, plan.forgotten, limits.maxTokens, signal);
  return {
    draft: newEvent.condensation({
      forgotten_event_ids: plan.forgotten.map((e) => e.id),
      summary: summary.text,
      summary_offset: plan.summaryOffset,
      llm_response_id: randomUUID(),
      kept_from_seq: plan.keptFromSeq,
      reason,
    }),
    response: summary.response,
  };
};
