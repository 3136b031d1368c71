import { describe, expect, it } from "vitest";
import {
  type ActionPayload,
  type EventDraft,
  type EventRow,
  eventKinds,
  eventSchema,
  eventToJson,
  InvalidEventError,
  isToolCallError,
  newEvent,
  type ObservationPayload,
  parseStoredEvent,
  type StoredEvent,
  type ToolCallErrorPayload,
} from "./events.ts";

const row = (kind: string, source: string, payload: unknown, seq = 1): EventRow => ({
  id: `00000000-0000-4000-8000-${String(seq).padStart(12, "0")}`,
  conversationId: "11111111-1111-4111-8111-111111111111",
  seq,
  kind,
  source,
  timestamp: "2026-11-22T21:11:34.123456Z",
  payload,
});

const stored = (d: EventDraft, seq = 1): StoredEvent => parseStoredEvent(row(d.kind, d.source, d.payload, seq));

const toolCall = { id: "call_1", name: "terminal", arguments: '{"command":"ls"}' };

const action: ActionPayload = {
  tool_name: "terminal",
  tool_call_id: "call_1",
  thought: [{ type: "text", text: "Looking." }],
  action: { kind: "TerminalAction", command: "ls", timeout: 5 },
  tool_call: toolCall,
  llm_response_id: "r1",
  history_seq: 3,
};

const terminalObservation: ObservationPayload = {
  tool_name: "terminal",
  tool_call_id: "call_1",
  action_id: "00000000-0000-4000-8000-000000000001",
  observation: {
    kind: "TerminalObservation",
    command: "ls",
    exit_code: 0,
    timed_out: false,
    output_cut_bytes: 0,
    content: [{ type: "text", text: "README.md\n[The command exited with code 0.]" }],
    is_error: false,
  },
};

const toolError: ToolCallErrorPayload = {
  tool_name: "browser",
  tool_call_id: "call_3",
  tool_call: { id: "call_3", name: "browser", arguments: "{}" },
  llm_response_id: "r2",
  history_seq: 9,
  thought: [],
  error: 'Unknown tool "browser".',
};

/** Rows as the writers before this module stored them (start pipeline, API, agent loop, run lock). */
const rowsWrittenBefore: { name: string; kind: string; source: string; payload: object }[] = [
  {
    name: "the pipeline's system prompt",
    kind: "SystemPromptEvent",
    source: "agent",
    payload: {
      system_prompt: { type: "text", text: "You are a coding agent working in a sandboxed Linux container." },
      tools: [
        {
          type: "function",
          function: {
            name: "terminal",
            description: "Run a bash command in the sandbox.",
            parameters: { type: "object", properties: { command: { type: "string" } }, required: ["command"] },
          },
        },
      ],
    },
  },
  {
    name: "the pipeline's initial message",
    kind: "MessageEvent",
    source: "user",
    payload: {
      llm_message: { role: "user", content: [{ type: "text", text: "please deploy it" }] },
      activated_skills: ["deployer"],
    },
  },
  {
    name: "a message sent through the API",
    kind: "MessageEvent",
    source: "user",
    payload: { llm_message: { role: "user", content: [{ type: "text", text: "And now?" }] } },
  },
  {
    name: "the agent's answer",
    kind: "MessageEvent",
    source: "agent",
    payload: {
      llm_message: { role: "assistant", content: [{ type: "text", text: "Done." }] },
      llm_response_id: "4d0f6c1e-2b8a-4c53-9d1e-6f7a8b9c0d1e",
      history_seq: 7,
    },
  },
  { name: "an action", kind: "ActionEvent", source: "agent", payload: action },
  { name: "a terminal observation", kind: "ObservationEvent", source: "environment", payload: terminalObservation },
  {
    name: "a finish observation",
    kind: "ObservationEvent",
    source: "environment",
    payload: {
      tool_name: "finish",
      tool_call_id: "call_2",
      action_id: "00000000-0000-4000-8000-000000000002",
      observation: { kind: "FinishObservation", content: [{ type: "text", text: "All done." }] },
    },
  },
  {
    name: "a run's error",
    kind: "AgentErrorEvent",
    source: "agent",
    payload: { error: "No LLM is configured." },
  },
  { name: "a tool call the model got wrong", kind: "AgentErrorEvent", source: "agent", payload: toolError },
  {
    name: "a status change",
    kind: "ConversationStateUpdateEvent",
    source: "environment",
    payload: { key: "execution_status", value: "running" },
  },
  { name: "a pause", kind: "PauseEvent", source: "user", payload: {} },
  { name: "an interrupt", kind: "InterruptEvent", source: "user", payload: {} },
];

describe("the event union", () => {
  it("has the kinds of DESIGN, each its own OpenAPI component", () => {
    expect(eventKinds).toEqual([
      "MessageEvent",
      "ActionEvent",
      "ObservationEvent",
      "UserRejectObservation",
      "AgentErrorEvent",
      "SystemPromptEvent",
      "ConversationStateUpdateEvent",
      "PauseEvent",
      "CondensationEvent",
      "InterruptEvent",
      "ConversationErrorEvent",
    ]);
    expect(eventSchema.options.map((o) => o.meta()?.id)).toEqual(eventKinds);
  });

  it.each(rowsWrittenBefore)("parses $name as stored before, unchanged", ({ kind, source, payload }) => {
    const e = parseStoredEvent(row(kind, source, payload));
    expect(e.kind).toBe(kind);
    expect(e.payload).toEqual(payload);
    expect(eventSchema.parse(eventToJson(e))).toEqual(eventToJson(e));
  });

  it("has every writer's constructor write what the writer wrote by hand", () => {
    const written = (name: string) => {
      const r = rowsWrittenBefore.find((w) => w.name === name);
      return r && { kind: r.kind, source: r.source, payload: r.payload };
    };
    expect(newEvent.userMessage([{ type: "text", text: "please deploy it" }], ["deployer"])).toEqual(
      written("the pipeline's initial message"),
    );
    expect(newEvent.userMessage([{ type: "text", text: "And now?" }])).toEqual(
      written("a message sent through the API"),
    );
    expect(
      newEvent.agentMessage("Done.", { llm_response_id: "4d0f6c1e-2b8a-4c53-9d1e-6f7a8b9c0d1e", history_seq: 7 }),
    ).toEqual(written("the agent's answer"));
    expect(newEvent.action(action)).toEqual(written("an action"));
    expect(newEvent.observation(terminalObservation)).toEqual(written("a terminal observation"));
    expect(newEvent.agentError("No LLM is configured.")).toEqual(written("a run's error"));
    expect(newEvent.toolCallError(toolError)).toEqual(written("a tool call the model got wrong"));
    expect(newEvent.executionStatus("running")).toEqual(written("a status change"));
    expect(newEvent.pause()).toEqual(written("a pause"));
  });

  it("parses what every constructor makes, and gives it back as { id, kind, source, timestamp, ...payload }", () => {
    const drafts: EventDraft[] = [
      newEvent.systemPrompt("You are the test agent.", []),
      newEvent.userMessage([{ type: "text", text: "hi" }]),
      newEvent.agentMessage("hello", { llm_response_id: "r", history_seq: 2 }),
      newEvent.action({
        tool_name: "think",
        tool_call_id: "c",
        thought: [],
        action: { kind: "ThinkAction", thought: "hm" },
        tool_call: { id: "c", name: "think", arguments: '{"thought":"hm"}' },
        llm_response_id: "r",
        history_seq: 2,
        security_risk: "LOW",
        summary: "think about it",
      }),
      newEvent.userReject(
        { id: "00000000-0000-4000-8000-000000000004", tool_name: "terminal", tool_call_id: "c2" },
        "not now",
      ),
      newEvent.observation({
        tool_name: "think",
        tool_call_id: "c",
        action_id: "00000000-0000-4000-8000-000000000004",
        observation: { kind: "ThinkObservation", content: [{ type: "text", text: "Your thought has been logged." }] },
      }),
      newEvent.agentError("stuck"),
      newEvent.toolCallError({
        tool_name: "terminal",
        tool_call_id: "c",
        tool_call: toolCall,
        llm_response_id: "r",
        history_seq: 1,
        error: "bad",
      }),
      newEvent.stateUpdate("title", "Renamed"),
      newEvent.executionStatus("finished"),
      newEvent.pause(),
      newEvent.condensation({
        forgotten_event_ids: ["00000000-0000-4000-8000-000000000003"],
        summary: "GOAL: greet.",
        summary_offset: 2,
        kept_from_seq: 4,
        reason: "events",
      }),
      newEvent.interrupt(),
      newEvent.conversationError("MaxIterationsReached", "Agent reached the maximum iterations limit (500)."),
    ];
    expect(new Set(drafts.map((d) => d.kind))).toEqual(new Set(eventKinds));
    drafts.forEach((d, i) => {
      const e = stored(d, i + 1);
      expect(e).toMatchObject({ kind: d.kind, source: d.source, payload: d.payload, seq: i + 1 });
      expect(eventToJson(e)).toEqual({
        // A run's own AgentErrorEvent reads with empty tool fields: the SDK requires them.
        ...(d.kind === "AgentErrorEvent" ? { tool_name: "", tool_call_id: "" } : {}),
        ...d.payload,
        id: e.id,
        kind: d.kind,
        source: d.source,
        timestamp: "2026-11-22T21:11:34.123456Z",
      });
      expect(eventSchema.safeParse(eventToJson(e)).success).toBe(true);
    });
  });

  it("narrows the payload by kind, and tells a tool call's error from a run's", () => {
    const events = [
      stored(newEvent.agentError("gone")),
      stored(
        newEvent.toolCallError({
          tool_name: "terminal",
          tool_call_id: "c9",
          tool_call: toolCall,
          llm_response_id: "r",
          history_seq: 1,
          error: "bad",
        }),
      ),
    ];
    expect(events.map(isToolCallError)).toEqual([false, true]);
    const e = events.find(isToolCallError);
    expect(e?.payload.tool_call.name).toBe("terminal");
  });
});

describe("parseStoredEvent refuses what is not an event", () => {
  it("an unknown kind, naming the kinds it knows", () => {
    expect(() => parseStoredEvent(row("BrowseEvent", "agent", {}))).toThrow(InvalidEventError);
    expect(() => parseStoredEvent(row("BrowseEvent", "agent", {}))).toThrow(
      /unknown kind "BrowseEvent" \(known: MessageEvent, ActionEvent,/,
    );
  });

  it("an unknown source", () => {
    expect(() => parseStoredEvent(row("PauseEvent", "robot", {}))).toThrow(/unknown source "robot"/);
  });

  it("a payload that misses a field or has one of the wrong type, naming the field", () => {
    const missing = row("MessageEvent", "user", { text: "hi" });
    expect(() => parseStoredEvent(missing)).toThrow(InvalidEventError);
    expect(() => parseStoredEvent(missing)).toThrow(/MessageEvent\) does not match its schema[\s\S]*llm_message/);
    const wrongType = row("ActionEvent", "agent", { ...action, history_seq: "3" });
    expect(() => parseStoredEvent(wrongType)).toThrow(/expected number[\s\S]*history_seq/);
    const badContent = row("ObservationEvent", "environment", {
      tool_name: "terminal",
      tool_call_id: "c",
      action_id: "a",
      observation: { kind: "TerminalObservation", content: "3 passed" },
    });
    expect(() => parseStoredEvent(badContent)).toThrow(/observation\.content/);
  });

  it("a payload that is not an object", () => {
    expect(() => parseStoredEvent(row("PauseEvent", "user", null))).toThrow(InvalidEventError);
    expect(() => parseStoredEvent(row("AgentErrorEvent", "agent", "boom"))).toThrow(/expected object/);
  });
});
