import { type EventDraft, newEvent, type StoredEvent } from "@tern/core";
import { describe, expect, it } from "vitest";
import { buildHistory } from "./history.ts";
import { analyzeRun } from "./run-state.ts";

let seq = 0;
const ev = (draft: EventDraft, id = `e${seq + 1}`): StoredEvent => {
  seq += 1;
  return { ...draft, id, conversationId: "c", seq, timestamp: new Date(seq * 1000).toISOString() };
};
const user = (text: string) => ev(newEvent.userMessage([{ type: "text", text }]));
const agent = (text: string, historySeq: number) =>
  ev(newEvent.agentMessage(text, { llm_response_id: `r${seq}`, history_seq: historySeq }));
const running = () => ev(newEvent.executionStatus("running"));
const action = (id: string, response: string, command: string, tool = "terminal") =>
  ev(
    newEvent.action({
      tool_name: tool,
      tool_call_id: `call-${id}`,
      thought: [],
      action: { kind: "TerminalAction", command },
      tool_call: { id: `call-${id}`, name: tool, arguments: JSON.stringify({ command }) },
      llm_response_id: response,
      history_seq: seq,
    }),
    id,
  );
const observation = (actionId: string, text: string, tool = "terminal") =>
  ev(
    newEvent.observation({
      tool_name: tool,
      tool_call_id: `call-${actionId}`,
      action_id: actionId,
      observation: { kind: "TerminalObservation", content: [{ type: "text", text }] },
    }),
  );

describe("analyzeRun", () => {
  it("lists an ActionEvent without its ObservationEvent as pending", () => {
    seq = 0;
    const events = [user("hi"), running(), action("a1", "r1", "ls"), observation("a1", "x"), action("a2", "r2", "pwd")];
    const state = analyzeRun(events);
    expect(state.pending.map((p) => p.event.id)).toEqual(["a2"]);
    expect(state.done).toBe(false);
    expect(state.iterations).toBe(2);
  });

  it("is done after the agent's answer, unless a user message came in after what the model had seen", () => {
    seq = 0;
    const answered = [user("q1"), running(), agent("a1", 2)];
    expect(analyzeRun(answered).done).toBe(true);
    expect(analyzeRun(answered).needsAgent).toBe(false);
    seq = 0;
    const late = [user("q1"), running(), user("q2"), agent("a1", 2)];
    expect(analyzeRun(late).done).toBe(false);
    expect(analyzeRun(late).needsAgent).toBe(true);
  });

  it("is done once every call of a response with finish has its result", () => {
    seq = 0;
    const events = [user("q"), running(), action("a1", "r1", "ls"), action("f1", "r1", "", "finish")];
    expect(analyzeRun(events).done).toBe(false);
    events.push(observation("a1", "x"), observation("f1", "bye", "finish"));
    expect(analyzeRun(events).done).toBe(true);
  });

  it("sees a pause asked after the run started, not one from an earlier run", () => {
    seq = 0;
    const events = [user("q"), ev(newEvent.pause()), running(), action("a1", "r1", "ls"), observation("a1", "x")];
    expect(analyzeRun(events).pauseRequested).toBe(false);
    events.push(ev(newEvent.pause()));
    expect(analyzeRun(events).pauseRequested).toBe(true);
  });

  it("is stuck after the same action and result four times, not three, nor when results differ", () => {
    seq = 0;
    const events = [user("q"), running()];
    for (let i = 0; i < 3; i++) events.push(action(`a${i}`, `r${i}`, "ls"), observation(`a${i}`, "same"));
    expect(analyzeRun(events).stuck).toBeNull();
    events.push(action("a3", "r3", "ls"), observation("a3", "same"));
    expect(analyzeRun(events).stuck?.pattern).toBe("repeated_action_observation");
    events.push(action("a4", "r4", "ls"), observation("a4", "different"));
    expect(analyzeRun(events).stuck).toBeNull();
  });

  it("is stuck after the same invalid call failing four times (three, then the nudge, then one more)", () => {
    seq = 0;
    const events = [user("q"), running()];
    const bad = (i: number) =>
      ev(
        newEvent.toolCallError({
          tool_name: "terminal",
          tool_call_id: `bad-${i}`,
          tool_call: { id: `bad-${i}`, name: "terminal", arguments: "{}" },
          llm_response_id: `rb${i}`,
          history_seq: seq,
          error: "Invalid arguments for terminal: command: required",
        }),
      );
    events.push(bad(1), bad(2));
    expect(analyzeRun(events).stuck).toBeNull();
    events.push(bad(3));
    expect(analyzeRun(events).stuck).toBeNull();
    events.push(bad(4));
    expect(analyzeRun(events).stuck?.pattern).toBe("repeated_action_error");
  });

  it("counts iterations of the current run only", () => {
    seq = 0;
    const events = [user("q"), running(), action("a1", "r1", "ls"), observation("a1", "x"), agent("done", 4)];
    events.push(user("again"), running(), action("a2", "r9", "ls"));
    expect(analyzeRun(events).iterations).toBe(1);
  });
});

describe("buildHistory", () => {
  it("hands a user message's images to the model after its text, in order; a text-only one has none", () => {
    seq = 0;
    const events = [
      ev(
        newEvent.userMessage([
          { type: "text", text: "look" },
          { type: "image", image_urls: ["https://x.test/a.png", "data:image/png;base64,AAAA"] },
          { type: "text", text: "closely" },
        ]),
      ),
      user("plain"),
    ];
    const { messages } = buildHistory(events, []);
    expect(messages[0]).toEqual({
      role: "user",
      text: "look\nclosely",
      images: ["https://x.test/a.png", "data:image/png;base64,AAAA"],
    });
    expect(messages[1]).toEqual({ role: "user", text: "plain" });
  });

  it("gives a user message that arrived while results were outstanding after those results", () => {
    seq = 0;
    const events = [user("q"), action("a1", "r1", "ls"), user("meanwhile"), observation("a1", "files")];
    const { messages } = buildHistory(events, []);
    expect(messages.map((m) => m.role)).toEqual(["user", "assistant", "tool", "user"]);
    expect(messages[3]).toMatchObject({ role: "user", text: "meanwhile" });
  });

  it("groups the calls of one response into one assistant message", () => {
    seq = 0;
    const events = [
      user("q"),
      action("a1", "r1", "ls"),
      action("a2", "r1", "pwd"),
      observation("a1", "x"),
      observation("a2", "y"),
    ];
    const { messages } = buildHistory(events, []);
    expect(messages[1]).toMatchObject({ role: "assistant", toolCalls: [{ id: "call-a1" }, { id: "call-a2" }] });
    expect(messages.slice(2).map((m) => (m.role === "tool" ? m.toolCallId : null))).toEqual(["call-a1", "call-a2"]);
  });

  it("adds a triggered skill once, to the first user message naming its trigger", () => {
    seq = 0;
    const skill = { name: "db", triggers: ["postgres"], content: "Use psql.", source: "AGENTS.md" };
    const { messages } = buildHistory([user("About Postgres?"), agent("ok", 1), user("postgres again")], [skill]);
    expect(messages[0]).toMatchObject({ role: "user" });
    expect(messages[0]?.role === "user" && messages[0].text).toContain("Use psql.");
    expect(messages[2]?.role === "user" && messages[2].text).toBe("postgres again");
  });
});

describe("buildHistory of a condensed view", () => {
  it("reads a condensation as its summary, and drops a result whose call was forgotten", () => {
    seq = 0;
    const first = user("first");
    seq = 41;
    const cut = observation("a-cut", "lost result");
    const summary = ev(
      newEvent.condensation({ forgotten_event_ids: [], summary: "GOAL: the thing", summary_offset: 1 }),
    );
    const later = [action("a2", "r2", "ls"), observation("a2", "files"), agent("done", 44)];
    const { messages } = buildHistory([first, summary, cut, ...later], []);
    expect(messages.map((m) => m.role)).toEqual(["user", "user", "assistant", "tool", "assistant"]);
    expect(messages[1]?.role === "user" && messages[1].text).toMatch(/<CONVERSATION_SUMMARY>[\s\S]*GOAL: the thing/);
    expect(messages.some((m) => m.role === "tool" && m.toolCallId === "call-a-cut")).toBe(false);
  });
});
