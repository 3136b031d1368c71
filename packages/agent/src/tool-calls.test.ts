import type { EventDraft } from "@tern/core";
import { describe, expect, it } from "vitest";
import type { LlmResponse } from "./llm/types.ts";
import { toolCallEvents } from "./tool-calls.ts";

const response = (calls: { id: string; name: string; arguments: string }[], text = ""): LlmResponse => ({
  id: null,
  text,
  toolCalls: calls,
  model: "m",
  usage: { promptTokens: 0, completionTokens: 0, cacheReadTokens: 0, cacheWriteTokens: 0 },
});

const errorOf = (e: EventDraft | undefined) => (e?.kind === "AgentErrorEvent" ? e.payload.error : undefined);

describe("toolCallEvents", () => {
  it("takes security_risk and summary off the arguments onto the event; missing or invalid risk is UNKNOWN", () => {
    const events = toolCallEvents(
      response([
        {
          id: "a",
          name: "terminal",
          arguments: '{"command":"rm -rf /tmp/x","security_risk":"high","summary":" Remove x "}',
        },
        { id: "b", name: "terminal", arguments: '{"command":"ls","security_risk":"SEVERE"}' },
        { id: "c", name: "file_editor", arguments: '{"command":"view","path":"/w"}' },
      ]),
      "r",
      1,
    );
    const payloads = events.map((e) => (e.kind === "ActionEvent" ? e.payload : null));
    expect(payloads.map((p) => [p?.security_risk, p?.summary])).toEqual([
      ["HIGH", "Remove x"],
      ["UNKNOWN", 'terminal: {"command":"ls"}'],
      ["UNKNOWN", 'file_editor: {"command":"view","path":"/w"}'],
    ]);
    // The tool's own arguments do not carry them.
    expect(payloads[0]?.action).toEqual({ kind: "TerminalAction", command: "rm -rf /tmp/x" });
  });

  it("makes an ActionEvent of a valid call, with the thought on the first event only", () => {
    const events = toolCallEvents(
      response(
        [
          { id: "c1", name: "terminal", arguments: '{"command":"ls"}' },
          { id: "c2", name: "think", arguments: '{"thought":"hm"}' },
        ],
        "Looking.",
      ),
      "r1",
      7,
    );
    expect(events.map((e) => e.kind)).toEqual(["ActionEvent", "ActionEvent"]);
    expect(events[0]?.payload).toMatchObject({
      tool_name: "terminal",
      tool_call_id: "c1",
      thought: [{ type: "text", text: "Looking." }],
      action: { kind: "TerminalAction", command: "ls" },
      llm_response_id: "r1",
      history_seq: 7,
    });
    expect(events[1]?.payload.thought).toEqual([]);
  });

  it("turns bad JSON, bad arguments and unknown tools into AgentErrorEvents naming the problem", () => {
    const events = toolCallEvents(
      response([
        { id: "a", name: "terminal", arguments: '{"command": ' },
        { id: "b", name: "file_editor", arguments: '{"command":"create","path":"/workspace/x"}' },
        { id: "c", name: "browser", arguments: "{}" },
      ]),
      "r",
      1,
    );
    expect(events.map((e) => e.kind)).toEqual(["AgentErrorEvent", "AgentErrorEvent", "AgentErrorEvent"]);
    expect(String(errorOf(events[0]))).toMatch(/not valid JSON/);
    expect(String(errorOf(events[1]))).toMatch(/file_text: required by create/);
    expect(String(errorOf(events[2]))).toMatch(/Unknown tool "browser"/);
  });

  it("gives calls without an id, or with a repeated one, ids of their own", () => {
    const events = toolCallEvents(
      response([
        { id: "", name: "think", arguments: '{"thought":"a"}' },
        { id: "same", name: "think", arguments: '{"thought":"b"}' },
        { id: "same", name: "think", arguments: '{"thought":"c"}' },
      ]),
      "r",
      1,
    );
    const ids = events.map((e) => String(e.payload.tool_call_id));
    expect(new Set(ids).size).toBe(3);
    expect(ids[1]).toBe("same");
    expect(ids.every((id) => id.length > 0)).toBe(true);
  });
});
