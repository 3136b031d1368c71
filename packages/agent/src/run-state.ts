import {
  type ActionPayload,
  type AgentTurn,
  isToolCallError,
  type ObservationPayload,
  type StoredEvent,
  type StoredEventOf,
} from "@tern/core";
import { isTurnEvent, textOf } from "./history.ts";

/** How many identical steps in a row make a loop `stuck` (OpenHands' stuck detector counts alike). */
export const stuckRepeats = { actionObservation: 4, toolError: 3 } as const;

export interface PendingAction {
  event: StoredEventOf<"ActionEvent">;
  payload: ActionPayload;
}

export interface RunState {
  /** ActionEvents whose ObservationEvent is not stored: started, maybe executed, result unknown. */
  pending: PendingAction[];
  /** The last turn is the agent's answer or a `finish` result: the run has nothing left to do. */
  done: boolean;
  /** A PauseEvent arrived after this run started. */
  pauseRequested: boolean;
  /** LLM responses in this run (since its `running` state change). */
  iterations: number;
  stuck: string | null;
  /** There is something for the agent to answer (a user message, a result, pending calls). */
  needsAgent: boolean;
}

const lastIndexOf = (events: StoredEvent[], pred: (e: StoredEvent) => boolean): number => {
  for (let i = events.length - 1; i >= 0; i--) if (pred(events[i] as StoredEvent)) return i;
  return -1;
};

const isRunningChange = (e: StoredEvent) =>
  e.kind === "ConversationStateUpdateEvent" && e.payload.key === "execution_status" && e.payload.value === "running";

/** The LLM response an event of the agent came from, and what the model had seen then (when it says). */
const turnOf = (e: StoredEvent): Partial<AgentTurn> =>
  e.kind === "MessageEvent" || e.kind === "ActionEvent" || e.kind === "AgentErrorEvent" ? e.payload : {};

const canonical = (v: unknown): string =>
  JSON.stringify(v, (_k, val) =>
    val && typeof val === "object" && !Array.isArray(val)
      ? Object.fromEntries(Object.entries(val).sort(([a], [b]) => a.localeCompare(b)))
      : val,
  );

/**
 * Stuck: the last steps since the user last spoke are the same action with the same result
 * (or the same bad call with the same error), again and again.
 */
const detectStuck = (events: StoredEvent[]): string | null => {
  const sinceUser = events.slice(lastIndexOf(events, (e) => e.kind === "MessageEvent" && e.source === "user") + 1);
  const observations = new Map<string, ObservationPayload>();
  for (const e of sinceUser) if (e.kind === "ObservationEvent") observations.set(e.payload.action_id, e.payload);
  const steps: string[] = [];
  for (const e of sinceUser) {
    if (e.kind === "ActionEvent") {
      const a = e.payload;
      const o = observations.get(e.id);
      if (!o) continue;
      steps.push(`action:${a.tool_name}:${canonical(a.action)}=>${textOf(o.observation.content)}`);
    } else if (isToolCallError(e)) {
      const t = e.payload;
      steps.push(`error:${t.tool_name}:${t.tool_call.arguments}=>${t.error}`);
    } else if (e.kind === "MessageEvent") {
      steps.push(`message:${e.id}`);
    }
  }
  const last = steps.at(-1);
  if (!last) return null;
  const need = last.startsWith("error:") ? stuckRepeats.toolError : stuckRepeats.actionObservation;
  if (steps.length < need || !steps.slice(-need).every((s) => s === last)) return null;
  return last.startsWith("error:")
    ? `The agent made the same invalid tool call ${need} times in a row and got the same error; it is stuck.`
    : `The agent repeated the same action ${need} times in a row with the same result; it is stuck.`;
};

/** Everything the loop decides on, read from the stored events alone (so any worker can continue). */
export const analyzeRun = (events: StoredEvent[]): RunState => {
  const observed = new Set(events.filter((e) => e.kind === "ObservationEvent").map((e) => e.payload.action_id));
  const pending = events
    .filter((e) => e.kind === "ActionEvent")
    .filter((e) => !observed.has(e.id))
    .map((e) => ({ event: e, payload: e.payload }));

  const runStart = lastIndexOf(events, isRunningChange);
  const inRun = events.slice(runStart + 1);
  const pauseRequested = runStart >= 0 && inRun.some((e) => e.kind === "PauseEvent");
  const responses = new Set<string>();
  for (const e of inRun) {
    const responseId = turnOf(e).llm_response_id;
    if (e.source === "agent" && responseId !== undefined) responses.add(responseId);
  }

  const lastTurn = events[lastIndexOf(events, isTurnEvent)];
  let done = false;
  if (lastTurn && pending.length === 0) {
    if (lastTurn.kind === "MessageEvent" && lastTurn.source === "agent") done = true;
    if (lastTurn.kind === "ObservationEvent") {
      // A `finish` among the calls of the last response ends the run once all its calls have results.
      const lastResponse = events.findLast((e) => e.kind === "ActionEvent")?.payload.llm_response_id;
      done = events.some(
        (e) =>
          e.kind === "ActionEvent" && e.payload.llm_response_id === lastResponse && e.payload.tool_name === "finish",
      );
    }
    // A user message that came in while the model was answering was not part of what it answered.
    const answered = events.findLast((e) => e.source === "agent" && turnOf(e).history_seq !== undefined);
    const seen = answered ? (turnOf(answered).history_seq ?? 0) : 0;
    if (done && events.some((e) => e.kind === "MessageEvent" && e.source === "user" && e.seq > seen)) done = false;
  }

  return {
    pending,
    done,
    pauseRequested,
    iterations: responses.size,
    stuck: detectStuck(events),
    needsAgent: !!lastTurn && !done,
  };
};
