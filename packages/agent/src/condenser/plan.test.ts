import { type EventDraft, newEvent, type StoredEvent } from "@tern/core";
import { describe, expect, it } from "vitest";
import { planCondensation } from "./plan.ts";
import { viewOf } from "./view.ts";

let seq = 0;
const ev = (draft: EventDraft, id = `e${seq + 1}`): StoredEvent => {
  seq += 1;
  return { ...draft, id, conversationId: "c", seq, timestamp: new Date(seq * 1000).toISOString() };
};
const system = () => ev(newEvent.systemPrompt("You are a test.", []));
const user = (text: string) => ev(newEvent.userMessage([{ type: "text", text }]));
/** One response with `calls` calls, then their results. */
const response = (n: number, calls = 1): StoredEvent[] => {
  const actions = Array.from({ length: calls }, (_, i) =>
    ev(
      newEvent.action({
        tool_name: "think",
        tool_call_id: `call-${n}-${i}`,
        thought: [],
        action: { kind: "ThinkAction", thought: `t${n}` },
        tool_call: { id: `call-${n}-${i}`, name: "think", arguments: "{}" },
        llm_response_id: `r${n}`,
        history_seq: seq,
      }),
    ),
  );
  const results = actions.map((a, i) =>
    ev(
      newEvent.observation({
        tool_name: "think",
        tool_call_id: `call-${n}-${i}`,
        action_id: a.id,
        observation: { kind: "ThinkObservation", content: [{ type: "text", text: "ok" }] },
      }),
    ),
  );
  return [...actions, ...results];
};

/** Stores a condensation of the view as the run would (the summary text stands in for the LLM's). */
const condenseInto = (events: StoredEvent[], limits = { maxEvents: 10, maxTokens: null }) => {
  const plan = planCondensation(viewOf(events), "events", limits);
  if (!plan) throw new Error("no plan");
  events.push(
    ev(
      newEvent.condensation({
        forgotten_event_ids: plan.forgotten.map((e) => e.id),
        summary: `summary at ${seq}`,
        summary_offset: plan.summaryOffset,
        kept_from_seq: plan.keptFromSeq,
        reason: "events",
      }),
    ),
  );
  return plan;
};

describe("planCondensation and viewOf", () => {
  it("keeps the head and the recent half, never splitting a response's calls from their results", () => {
    seq = 0;
    const events = [system(), user("goal"), ...Array.from({ length: 6 }, (_, i) => response(i, 2)).flat()];
    const plan = planCondensation(viewOf(events), "events", { maxEvents: 10, maxTokens: null });
    expect(plan?.summaryOffset).toBe(2);
    // The tail starts at a response's first call.
    const first = events.find((e) => e.seq === plan?.keptFromSeq);
    expect(first?.kind).toBe("ActionEvent");
    expect(plan?.forgotten.every((e) => e.seq > 2 && e.seq < (plan?.keptFromSeq ?? 0))).toBe(true);
  });

  it("gives the same view from the whole history and from the latest condensation's bounded read", () => {
    seq = 0;
    const events = [system(), user("goal")];
    for (let i = 0; i < 40; i++) {
      events.push(...response(i));
      if (viewOf(events).length > 10) condenseInto(events);
    }
    const condensations = events.filter((e) => e.kind === "CondensationEvent");
    expect(condensations.length).toBeGreaterThan(3);
    const latest = condensations.at(-1);
    const keptFrom = latest?.kind === "CondensationEvent" ? (latest.payload.kept_from_seq ?? 0) : 0;
    const bounded = [...events.slice(0, 2), ...events.filter((e) => e.seq >= keptFrom)];
    expect(viewOf(bounded).map((e) => e.id)).toEqual(viewOf(events).map((e) => e.id));
    // The view: head, the latest summary, then the kept tail.
    const view = viewOf(events);
    expect(view.slice(0, 3).map((e) => e.kind)).toEqual(["SystemPromptEvent", "MessageEvent", "CondensationEvent"]);
    expect(view.filter((e) => e.kind === "CondensationEvent")).toHaveLength(1);
  });

  it("has nothing to forget in a view of the head and one response", () => {
    seq = 0;
    const events = [system(), user("goal"), ...response(1, 3)];
    expect(planCondensation(viewOf(events), "context_error", { maxEvents: 10, maxTokens: null })).toBeNull();
  });
});
