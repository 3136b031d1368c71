import type { StoredEvent } from "@tern/core";
import { isTurnEvent } from "../history.ts";

/** Events the model is shown: the system prompt, messages, calls and their results; a condensation, as its summary. */
const isViewEvent = (e: StoredEvent): boolean =>
  e.kind === "SystemPromptEvent" || e.kind === "CondensationEvent" || isTurnEvent(e);

/**
 * The model's view of stored events (OpenHands' View.from_events): the events in order, each
 * CondensationEvent removing its forgotten events and standing, as its summary, at its
 * summary_offset. Given the whole history it applies every condensation; given a bounded read
 * (the head, then the events from the latest condensation's `kept_from_seq`) it gives the same
 * view, since each condensation forgets everything between the head and its kept tail, earlier
 * summaries included.
 */
export const viewOf = (events: StoredEvent[]): StoredEvent[] => {
  let view: StoredEvent[] = [];
  const seen = new Set<string>();
  for (const e of events) {
    // A bounded read may hand the head twice (read apart, and again in the range): once is enough.
    if (seen.has(e.id)) continue;
    seen.add(e.id);
    if (e.kind === "CondensationEvent") {
      const forgotten = new Set(e.payload.forgotten_event_ids);
      view = view.filter((v) => !forgotten.has(v.id));
      const offset = e.payload.summary_offset;
      if (e.payload.summary !== null && offset !== null) view.splice(Math.min(offset, view.length), 0, e);
    } else if (isViewEvent(e)) {
      view.push(e);
    }
  }
  return view;
};
