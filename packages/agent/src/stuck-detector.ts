import { type EventDraftOf, isToolCallError, type ObservationPayload, type StoredEvent } from "@tern/core";
import { textOf } from "./history.ts";

/**
 * How many in a row make each of OpenHands' five stuck patterns (its StuckDetectionThresholds:
 * 4, 3, 3, 6; its context-error check is a stub, ours counts condensations). `monologue` counts
 * talk-only responses: our loop ends a run on the agent's plain answer, so the monologue OpenHands
 * looks for (agent messages one after another) shows here as responses that only call `think`;
 * 0 turns it off.
 */
export interface StuckThresholds {
  actionObservation: number;
  actionError: number;
  monologue: number;
  alternating: number;
  contextErrors: number;
}

export const defaultStuckThresholds: StuckThresholds = {
  actionObservation: 4,
  actionError: 3,
  monologue: 6,
  alternating: 6,
  contextErrors: 3,
};

export type StuckPattern =
  | "repeated_action_observation"
  | "repeated_action_error"
  | "monologue"
  | "alternating_pattern"
  | "context_error_loop";

export interface Stuck {
  pattern: StuckPattern;
  message: string;
}

/** One step of the agent, as the patterns compare them (ids and timestamps left out). */
type Step =
  | {
      type: "action";
      action: string;
      tool: string;
      result: string;
      failed: boolean;
      errorText: string;
      response: string;
    }
  | { type: "talk"; response: string }
  | { type: "context_error" };

const canonical = (v: unknown): string =>
  JSON.stringify(v, (_k, val) =>
    val && typeof val === "object" && !Array.isArray(val)
      ? Object.fromEntries(Object.entries(val).sort(([a], [b]) => a.localeCompare(b)))
      : val,
  );

/** A nudge the run wrote (see actionErrorNudge): a message to the model, not from the user. */
const isNudge = (e: StoredEvent) => e.kind === "MessageEvent" && e.source === "environment";

/** The nudge as the run stores it: a message the model reads as the user's, from the environment. */
export const nudgeEvent = (text: string): EventDraftOf<"MessageEvent"> => ({
  kind: "MessageEvent",
  source: "environment",
  payload: { llm_message: { role: "user", content: [{ type: "text", text }] } },
});

/**
 * The agent's steps since the user last spoke, oldest first. Nudges and condensations for length
 * do not break a pattern; a condensation after the provider's context-length error is a step of
 * its own (the context-error loop).
 */
const stepsOf = (events: StoredEvent[]): Step[] => {
  let from = 0;
  for (let i = events.length - 1; i >= 0; i--) {
    const e = events[i] as StoredEvent;
    if (e.kind === "MessageEvent" && e.source === "user") {
      from = i + 1;
      break;
    }
  }
  const recent = events.slice(from);
  const observations = new Map<string, ObservationPayload>();
  for (const e of recent) if (e.kind === "ObservationEvent") observations.set(e.payload.action_id, e.payload);
  const steps: Step[] = [];
  for (const e of recent) {
    if (e.kind === "ActionEvent") {
      const a = e.payload;
      const o = observations.get(e.id);
      if (!o) continue;
      const result = textOf(o.observation.content);
      if (a.tool_name === "think") {
        steps.push({ type: "talk", response: a.llm_response_id });
        continue;
      }
      steps.push({
        type: "action",
        action: `${a.tool_name}:${canonical(a.action)}:${textOf(a.thought)}`,
        tool: a.tool_name,
        result,
        failed: o.observation.is_error === true,
        errorText: result,
        response: a.llm_response_id,
      });
    } else if (isToolCallError(e)) {
      const t = e.payload;
      steps.push({
        type: "action",
        action: `call:${t.tool_name}:${t.tool_call.arguments}`,
        tool: t.tool_name,
        result: t.error,
        failed: true,
        errorText: t.error,
        response: t.llm_response_id,
      });
    } else if (e.kind === "MessageEvent" && e.source === "agent") {
      steps.push({ type: "talk", response: e.id });
    } else if (e.kind === "CondensationEvent" && e.payload.reason === "context_error") {
      steps.push({ type: "context_error" });
    }
  }
  return steps;
};

type ActionStep = Extract<Step, { type: "action" }>;

const actionsOf = (steps: Step[]): ActionStep[] => steps.filter((s): s is ActionStep => s.type === "action");

/** The trailing run of the same action failing, most recent last. */
const errorStreak = (steps: Step[]): ActionStep[] => {
  const actions = actionsOf(steps);
  const last = actions.at(-1);
  if (!last?.failed) return [];
  let n = 0;
  for (let i = actions.length - 1; i >= 0; i--) {
    const s = actions[i] as ActionStep;
    if (s.action !== last.action || !s.failed) break;
    n++;
  }
  return actions.slice(-n);
};

/** Responses that only talk (a plain answer, or `think` calls alone), counted back from the last one. */
const monologueLength = (steps: Step[]): number => {
  // A response that called `think` beside a real tool acted: its thoughts are not talk.
  const acting = new Set(actionsOf(steps).map((s) => s.response));
  const responses = new Set<string>();
  for (let i = steps.length - 1; i >= 0; i--) {
    const s = steps[i] as Step;
    if (s.type === "context_error") continue;
    if (s.type === "action") break;
    if (!acting.has(s.response)) responses.add(s.response);
  }
  return responses.size;
};

const contextErrorRun = (steps: Step[]): number => {
  let n = 0;
  for (let i = steps.length - 1; i >= 0 && steps[i]?.type === "context_error"; i--) n++;
  return n;
};

/**
 * Whether the agent is stuck, and in which of the five patterns, from the stored events alone.
 * The patterns, as OpenHands' StuckDetector has them:
 * 1. the same action with the same result, `actionObservation` times in a row;
 * 2. the same action failing more than `actionError` times in a row (the model is nudged at
 *    exactly `actionError`: actionErrorNudge);
 * 3. a monologue: `monologue` responses in a row that only talk;
 * 4. two actions taking turns, with the same two results, over `alternating` actions;
 * 5. the provider refusing the request as too long `contextErrors` times in a row, condensing
 *    each time, with no answer of the model between (condensing does not help).
 */
export const detectStuck = (
  events: StoredEvent[],
  thresholds: StuckThresholds = defaultStuckThresholds,
): Stuck | null => {
  const steps = stepsOf(events);
  if (steps.length === 0) return null;

  const t = thresholds;
  if (t.contextErrors > 0 && contextErrorRun(steps) >= t.contextErrors) {
    return {
      pattern: "context_error_loop",
      message:
        `The agent is stuck in a context-error loop: the LLM refused the request as too long ${contextErrorRun(steps)} ` +
        "times in a row, and condensing the history did not make it fit.",
    };
  }
  const streak = errorStreak(steps);
  if (t.actionError > 0 && streak.length > t.actionError) {
    const last = streak.at(-1) as ActionStep;
    return {
      pattern: "repeated_action_error",
      message:
        `The agent is stuck repeating a failing action: it called \`${last.tool}\` with the same arguments ` +
        `${streak.length} times in a row and it failed each time, after being told so.`,
    };
  }
  const actions = actionsOf(steps);
  const lastAction = steps.at(-1)?.type === "action" ? actions.at(-1) : undefined;
  if (t.actionObservation > 0 && lastAction && actions.length >= t.actionObservation) {
    const tail = actions.slice(-t.actionObservation);
    if (tail.every((s) => s.action === lastAction.action && s.result === lastAction.result)) {
      return {
        pattern: "repeated_action_observation",
        message:
          `The agent is stuck repeating the same action with the same result: \`${lastAction.tool}\` ` +
          `${t.actionObservation} times in a row.`,
      };
    }
  }
  if (t.monologue > 0 && monologueLength(steps) >= t.monologue) {
    return {
      pattern: "monologue",
      message:
        `The agent is stuck in a monologue: ${monologueLength(steps)} responses in a row only talked ` +
        "(answers or `think` calls) without acting or hearing from the user.",
    };
  }
  if (t.alternating > 0 && lastAction && actions.length >= t.alternating) {
    const tail = actions.slice(-t.alternating);
    const alternates = tail.every(
      (s, i) => i < 2 || (s.action === tail[i - 2]?.action && s.result === tail[i - 2]?.result),
    );
    if (alternates && tail[0]?.action !== tail[1]?.action) {
      return {
        pattern: "alternating_pattern",
        message:
          `The agent is stuck alternating between two actions with the same results (\`${tail[0]?.tool}\` and ` +
          `\`${tail[1]?.tool}\`), ${t.alternating} actions in a row.`,
      };
    }
  }
  return null;
};

/**
 * The one nudge OpenHands gives before it calls a failing action stuck: when the same action has
 * just failed exactly `actionError` times in a row and no nudge followed yet, the text of a
 * message that tells the model so (the run stores it as a MessageEvent of the environment).
 */
export const actionErrorNudge = (
  events: StoredEvent[],
  thresholds: StuckThresholds = defaultStuckThresholds,
): string | null => {
  if (thresholds.actionError <= 0) return null;
  const last = events.findLast((e) => e.kind !== "ConversationStateUpdateEvent");
  if (!last || isNudge(last)) return null;
  const streak = errorStreak(stepsOf(events));
  if (streak.length !== thresholds.actionError) return null;
  const step = streak.at(-1) as ActionStep;
  return (
    `You have called \`${step.tool}\` with the same arguments ${streak.length} times in a row and it failed each time ` +
    `(last error: ${step.errorText.slice(0, 500)}). Calling it again the same way will fail again: read the error, ` +
    "then change the arguments or try another approach."
  );
};
