import type { ActionPayload, AgentTurn, StoredEvent, StoredEventOf } from "@tern/core";
import { isTurnEvent } from "./history.ts";
import { detectStuck, type Stuck, type StuckThresholds } from "./stuck-detector.ts";

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
  /** The stuck pattern the last steps make, if any (stuck-detector.ts). */
  stuck: Stuck | null;
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

/** Everything the loop decides on, read from the stored events alone (so any worker can continue). */
export const analyzeRun = (events: StoredEvent[], stuckThresholds?: StuckThresholds): RunState => {
  // A call the user rejected is answered by its UserRejectObservation: it never runs.
  const observed = new Set(
    events.flatMap((e) =>
      e.kind === "ObservationEvent" || e.kind === "UserRejectObservation" ? [e.payload.action_id] : [],
    ),
  );
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
    stuck: detectStuck(events, stuckThresholds),
    needsAgent: !!lastTurn && !done,
  };
};
